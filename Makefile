# The two commands of the README: `make demo` and `make test`. Each sets itself up
# (npm ci when the lock changed, build, a running Docker engine, the sandbox base image;
# make test also what only the tests need).
.PHONY: setup setup-demo build demo test bench lint

# Everything make test needs; setup-demo: only what make demo needs (no Kubernetes, PostgreSQL, Ceph, chromium, gVisor).
setup:
	bash scripts/setup.sh test

setup-demo:
	bash scripts/setup.sh demo

build:
	npm run build

# make demo: 20 one-minute tasks on 4 slots with sandbox kills; DEMO_FAST=1: the same in under a minute.
demo: setup-demo
	node bin/berth.js demo $(if $(DEMO_FAST),--fast)

test: setup
	npx biome check src test bench bin scripts
	node scripts/run-tests.js

bench: setup
	npm run bench

lint:
	npx biome check src test bench bin scripts
