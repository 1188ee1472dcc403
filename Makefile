# The two commands of the README: `make demo` and `make test`. Each sets itself up
# (npm ci when the lock changed, build, a running Docker engine, the sandbox base image).
.PHONY: setup build demo test bench lint

setup:
	bash scripts/setup.sh

build:
	npm run build

demo: setup
	node bin/berth.js demo

test: setup
	npx biome check src test bench bin scripts
	node scripts/run-tests.js

bench: setup
	npm run bench

lint:
	npx biome check src test bench bin scripts
