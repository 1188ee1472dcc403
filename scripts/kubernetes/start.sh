#!/usr/bin/env bash
# Starts berth's test cluster: a real Kubernetes v1.20.2 control plane and two nodes on this
# machine, built offline (build.sh) and never touching the host's own Docker engine.
#   etcd (Debian's etcd-server) + kube-apiserver (TLS, RBAC + Node authorization) +
#   kube-controller-manager + kube-scheduler, all on loopback;
#   node berth-kube-runc: a kubelet (dockershim) on a Docker engine of its own, runc;
#   node berth-kube-runsc: the same with gVisor (Debian's runsc) as that engine's default
#   runtime, tainted, reached through the RuntimeClass "gvisor" (dockershim accepts only the
#   handler "docker", so gVisor is a node pool selected by the RuntimeClass's scheduling);
#   as in such pools, host-network Pods (node agents: the worker DaemonSet) run with runc.
# Pods get the network of cni-isolated (loopback + an unreachable dummy address). Prints the
# admin kubeconfig's path on its last line. stop.sh removes everything this starts.
#
# Invariants: root only. Idempotent: a running stack that answers is reused; a broken or
# half-started one is stopped first. Everything lives under $BERTH_KUBE_STATE (default
# /var/lib/berth-kube) except what the kubelet insists on (sysctls, /var/log/pods), which is
# recorded there for stop.sh to restore.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
state=${BERTH_KUBE_STATE:-/var/lib/berth-kube}
cache=${BERTH_KUBE_CACHE:-/var/cache/berth-kubernetes}
bin=$cache/bin
api_port=16443
etcd_port=23790
nodes=(runc runsc)
say() { printf 'kubernetes stack: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}

[[ $(id -u) -eq 0 ]] || die "needs root (it starts Docker engines and kubelets)"

if [[ -f $state/ready ]] && node "$here/stack.mjs" ping "$state" >/dev/null 2>&1; then
  say "already running"
  echo "$state/admin.kubeconfig"
  exit 0
fi
[[ -d $state ]] && "$here/stop.sh" >/dev/null

"$here/build.sh" >&2
apt_install() {
  local need=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
  [[ ${#need[@]} -eq 0 ]] || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
}
apt_install etcd-server openssl jq iproute2 util-linux
command -v runsc >/dev/null || "$repo/scripts/ensure-runsc.sh" >&2

mkdir -p "$state"/{pki,log,cni/bin,cni/net.d}
node_ip=$(ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[[ -n $node_ip && $node_ip != 127.* ]] || node_ip=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -n1)
[[ -n $node_ip ]] || die "no non-loopback IPv4 address: the kubelet refuses a loopback node IP"

# What the kubelet changes on the host, for stop.sh to put back.
for key in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
  printf '%s=%s\n' "$key" "$(sysctl -n "$key")"
done >"$state/sysctl.orig"
# Paths the kubelet creates whatever its flags say; stop.sh removes those that were not here.
for dir in /var/log/pods /var/log/containers /var/lib/kubelet /usr/libexec/kubernetes; do
  [[ -e $dir ]] || echo "$dir"
done >"$state/created-dirs"

# --- PKI: one CA; serving certs for the API server, client certs for everyone else.
pki=$state/pki
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=berth-test-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt"
issue() { # name CN O [SANs]
  local name=$1 cn=$2 org=$3 sans=${4:-}
  openssl_quiet req -newkey rsa:2048 -nodes -subj "/CN=$cn${org:+/O=$org}" -keyout "$pki/$name.key" -out "$pki/$name.csr"
  local ext="extendedKeyUsage=clientAuth,serverAuth"
  [[ -n $sans ]] && ext="$ext
subjectAltName=$sans"
  openssl_quiet x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -out "$pki/$name.crt" -extfile <(printf '%s\n' "$ext")
}
issue apiserver kube-apiserver "" "IP:127.0.0.1,IP:$node_ip,IP:10.254.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
issue admin berth-admin system:masters
issue apiserver-kubelet kube-apiserver-kubelet-client system:masters
issue controller-manager system:kube-controller-manager ""
issue scheduler system:kube-scheduler ""
for n in "${nodes[@]}"; do
  issue "node-$n" "system:node:berth-kube-$n" system:nodes
  # The kubelet's serving certificate, which the API server verifies (logs, exec).
  issue "kubelet-$n" "berth-kube-$n" "" "IP:$node_ip,DNS:berth-kube-$n"
done
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

kubeconfig() { # file user
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: berth-test
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$pki/$2.crt", client-key: "$pki/$2.key"}
contexts:
- name: berth-test
  context: {cluster: berth-test, user: $2}
current-context: berth-test
EOF
}
for user in admin controller-manager scheduler; do kubeconfig "$state/$user.kubeconfig" "$user"; done
for n in "${nodes[@]}"; do kubeconfig "$state/node-$n.kubeconfig" "node-$n"; done

spawn() { # name command...
  local name=$1
  shift
  setsid "$@" >"$state/log/$name.log" 2>&1 </dev/null &
  echo $! >"$state/$name.pid"
}

# --- control plane
spawn etcd etcd --name berth-test --data-dir "$state/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
  --initial-cluster berth-test=http://127.0.0.1:23800 --listen-metrics-urls=
spawn kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --secure-port "$api_port" --advertise-address "$node_ip" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --authorization-mode Node,RBAC \
  --enable-admission-plugins NodeRestriction \
  --kubelet-client-certificate "$pki/apiserver-kubelet.crt" --kubelet-client-key "$pki/apiserver-kubelet.key" \
  --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc \
  --service-cluster-ip-range 10.254.0.0/24 --allow-privileged=true --profiling=false
node "$here/stack.mjs" wait-api "$state" || die "the API server did not come up; see $state/log/kube-apiserver.log"
spawn kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$state/controller-manager.kubeconfig" \
  --leader-elect=false --port 0 --secure-port 10357 --bind-address 127.0.0.1 \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --use-service-account-credentials=true --controllers '*,-nodeipam,-cloud-node-lifecycle,-route,-service' --profiling=false
spawn kube-scheduler "$bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
  --leader-elect=false --port 0 --secure-port 10359 --bind-address 127.0.0.1 --profiling=false

# --- nodes: the network plugin, a Docker engine each, then a kubelet each.
install -m 0755 "$here/cni-isolated" "$state/cni/bin/berth-isolated"
ln -sf berth-isolated "$state/cni/bin/loopback"
printf '{"cniVersion":"0.3.1","name":"berth-isolated","type":"berth-isolated"}\n' >"$state/cni/net.d/10-berth-isolated.conf"

# Capabilities this machine's root lacks (e.g. CAP_SYS_RESOURCE in some VMs): runc then
# cannot apply the kubelet's negative oom_score_adj nor a privileged container's caps.
cap_names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
  NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT
  SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE
  AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ
  PERFMON BPF CHECKPOINT_RESTORE)
cap_bnd=$((16#$(awk '/^CapBnd/ {print $2}' /proc/self/status)))
missing=()
for i in "${!cap_names[@]}"; do ((cap_bnd >> i & 1)) || missing+=("\"CAP_${cap_names[i]}\""); done
mkdir -p "$state/bin"
runtime_for() { # the path to run a real runtime by: itself, or wrapped by clamp-runtime
  local real=$1
  if [[ ${#missing[@]} -gt 0 ]]; then
    (IFS=,; printf '[%s]\n' "${missing[*]}") >"$state/bin/missing-caps"
    install -m 0755 "$here/clamp-runtime" "$state/bin/berth-clamp-$real"
    echo "$state/bin/berth-clamp-$real"
  else
    command -v "$real"
  fi
}
# The gVisor node's engine runs pool-runtime: host-network containers (the worker DaemonSet)
# with runc, all others under runsc, as gVisor node pools do.
install -m 0755 "$here/pool-runtime" "$state/bin/berth-pool-runsc"
{
  printf 'host=(%q)\n' "$(runtime_for runc)"
  printf 'sandboxed=(%q --platform=ptrace --network=none --host-uds=open)\n' "$(runtime_for runsc)"
} >"$state/bin/pool-runtime.conf"
for n in "${nodes[@]}"; do
  d=$state/node-$n
  mkdir -p "$d"
  path=$(runtime_for runc)
  [[ $n == runsc ]] && path=$state/bin/berth-pool-runsc
  cat >"$d/daemon.json" <<EOF
{
  "default-runtime": "node-$n",
  "runtimes": {"node-$n": {"path": "$path"}},
  "bridge": "none", "iptables": false, "ip-masq": false, "ip-forward": false,
  "exec-opts": ["native.cgroupdriver=cgroupfs"], "cgroup-parent": "/berth-kube-$n",
  "storage-driver": "overlay2", "log-driver": "json-file", "live-restore": false
}
EOF
  spawn "dockerd-$n" dockerd --config-file "$d/daemon.json" --data-root "$d/docker" --exec-root "$d/exec" \
    --pidfile "$d/dockerd.pid" -H "unix://$d/docker.sock"
done
for n in "${nodes[@]}"; do
  node "$here/stack.mjs" wait-docker "$state/node-$n/docker.sock" ||
    die "the node-$n Docker engine did not come up; see $state/log/dockerd-$n.log"
done
say "loading the pause and sandbox images into the nodes' engines"
node "$here/stack.mjs" load-images "$state" "$bin/pause" "${BERTH_KUBE_IMAGES:-}" || die "loading images failed"

machine=$(hostname | sed 's/[^A-Za-z0-9_.-]/-/g' | cut -c1-63)
for n in "${nodes[@]}"; do
  d=$state/node-$n
  [[ $n == runc ]] && port=10350 || port=10360
  taints=''
  [[ $n == runsc ]] && taints=berth.dev/runtime=runsc:NoSchedule
  spawn "kubelet-$n" "$bin/kubelet" --kubeconfig "$state/node-$n.kubeconfig" \
    --hostname-override "berth-kube-$n" --node-ip "$node_ip" \
    --node-labels "berth.dev/machine=$machine,berth.dev/runtime=$n" ${taints:+--register-with-taints "$taints"} \
    --container-runtime docker --docker-endpoint "unix://$d/docker.sock" \
    --experimental-dockershim-root-directory "$d/dockershim" \
    --container-runtime-endpoint "unix://$d/dockershim.sock" --image-service-endpoint "unix://$d/dockershim.sock" \
    --root-dir "$d/kubelet" --tls-cert-file "$pki/kubelet-$n.crt" --tls-private-key-file "$pki/kubelet-$n.key" \
    --volume-plugin-dir "$d/volume-plugins" \
    --pod-infra-container-image berth.local/pause:3.4.1 \
    --network-plugin cni --cni-bin-dir "$state/cni/bin" --cni-conf-dir "$state/cni/net.d" \
    --cni-cache-dir "$d/cni-cache" \
    --cgroups-per-qos=false --enforce-node-allocatable= --cgroup-driver cgroupfs \
    --fail-swap-on=false --make-iptables-util-chains=false \
    --port "$port" --healthz-port $((port - 2)) --read-only-port 0 \
    --anonymous-auth=false --client-ca-file "$pki/ca.crt" --authorization-mode AlwaysAllow \
    --eviction-hard 'memory.available<100Mi,nodefs.available<1%,imagefs.available<1%' \
    --image-gc-high-threshold 100 --image-gc-low-threshold 99 --pod-max-pids 1024 \
    --resolv-conf /etc/resolv.conf --v 1
done

if ! node "$here/stack.mjs" wait-nodes "$state"; then
  for n in "${nodes[@]}"; do grep -E '^[EF][0-9]' "$state/log/kubelet-$n.log" | tail -n 3 >&2 || true; done
  die "the nodes did not become Ready; see $state/log/kubelet-*.log"
fi
node "$here/stack.mjs" objects "$state" || die "creating the namespace and RuntimeClass failed"
touch "$state/ready"
say "up: API https://127.0.0.1:$api_port, nodes berth-kube-runc and berth-kube-runsc (label berth.dev/machine=$machine)"
echo "$state/admin.kubeconfig"
