# locationd — build, test, demo. `make help` lists the targets.
SWIFT      ?= swift
WERROR     := -Xswiftc -warnings-as-errors
DEMO_DIR   := .build/demo
DEMO_SOCK  := $(DEMO_DIR)/locationd.sock
DEMO_LOG   := $(DEMO_DIR)/demo.nmea
SPEED      ?= 10

.PHONY: help deps build test demo clean

help:
	@echo "make demo   install deps, build, run locationd on a demo log and watch it"
	@echo "make test   build with warnings as errors and run the whole test suite"
	@echo "make build  debug build"

deps:
	@scripts/install-deps

build:
	$(SWIFT) build $(WERROR)

test: deps
	$(SWIFT) build --build-tests $(WERROR)
	$(SWIFT) test $(WERROR)

demo: deps build
	@mkdir -p $(DEMO_DIR)
	$(SWIFT) run locationctl simulate demo --output $(DEMO_LOG)
	@scripts/demo $(DEMO_LOG) $(DEMO_SOCK) $(SPEED)

clean:
	rm -rf .build
