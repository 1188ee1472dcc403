# The two commands of the README: `make demo` and `make test`. Each sets itself up
# (the Node.js that runs berth, npm ci when the lock or the runtime changed, build, a running
# Docker engine, the sandbox base image; make test also what only the tests need).
.PHONY: setup setup-demo build demo test bench lint

# Every command below runs on the Node.js that runs berth (the set-up's first step installs
# it when the machine's own is older: scripts/lib/node-runtime.sh).
WITH_NODE := scripts/with-node.sh

# Everything make test needs; setup-demo: only what make demo needs (no Kubernetes, PostgreSQL, Ceph, chromium, gVisor).
setup:
	bash scripts/setup.sh test

setup-demo:
	bash scripts/setup.sh demo

build:
	$(WITH_NODE) npm run build

# make demo: 20 one-minute tasks on 4 slots with sandbox kills; DEMO_FAST=1: the same in under a minute.
demo: setup-demo
	$(WITH_NODE) node bin/berth.js demo $(if $(DEMO_FAST),--fast)

test: setup
	$(WITH_NODE) npx biome check src test bench bin scripts
	$(WITH_NODE) node scripts/run-tests.js

bench: setup
	$(WITH_NODE) npm run bench

lint:
	$(WITH_NODE) npx biome check src test bench bin scripts
