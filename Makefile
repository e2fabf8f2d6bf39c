# locationd — build, test, demo, install. `make help` lists the targets.
SWIFT      ?= swift
WERROR     := -Xswiftc -warnings-as-errors
DEMO_DIR   := .build/demo
DEMO_SOCK  := $(DEMO_DIR)/locationd.sock
DEMO_LOG   := $(DEMO_DIR)/demo.nmea
SPEED      ?= 10

# Install layout (docs/systemd.md "Install"). DESTDIR is prepended to every path.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
# systemd reads units from /usr/local/lib/systemd/system too; distributions use /lib/systemd/system.
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSCONFDIR  ?= /etc
DOCDIR      ?= $(PREFIX)/share/doc/locationd
DATADIR     ?= $(PREFIX)/share
# The bundled scenarios; locationctl looks for them by name in ./Scenarios, then in
# $(BINDIR)/../share/locationd/scenarios (relative to itself, so any PREFIX works unchanged).
SCENARIODIR := $(DATADIR)/locationd/scenarios
# The installed build: release, Swift runtime linked statically (less idle memory, and the
# binaries do not depend on the toolchain's libraries being installed), in its own build folder.
RELEASE     := -c release --static-swift-stdlib --scratch-path .build-install
# Where the binaries to install come from: that build unless told otherwise.
BUILD_BIN   ?= $(shell $(SWIFT) build $(RELEASE) --show-bin-path 2>/dev/null)

.PHONY: help deps build release test check-units check-install demo install install-files clean bench fuzz orderfile

help:
	@echo "make demo     install deps, build, run locationd on a demo log and watch it"
	@echo "make test     build with warnings as errors, run the test suite, check units and install"
	@echo "make build    debug build"
	@echo "make install  release build, then install binaries, units, config, completions, docs, scenarios"
	@echo "              (PREFIX=$(PREFIX), DESTDIR=$(DESTDIR); see docs/systemd.md)"
	@echo "make bench    benchmarks against gpsdecode, pynmea2, gpspipe (docs/benchmarks.md)"
	@echo "make fuzz     libFuzzer runs of the NMEA, request and OwnTracks command decoders (FUZZ_SECONDS=$(FUZZ_SECONDS))"
	@echo "make orderfile  re-record scripts/locationd.order after changing the daemon (needs valgrind)"

deps:
	@scripts/install-deps

build:
	$(SWIFT) build $(WERROR)

release:
	$(SWIFT) build $(RELEASE) --product locationd
	$(SWIFT) build $(RELEASE) --product locationctl
	$(SWIFT) build $(RELEASE) --product locationd-mqtt

test: deps
	$(SWIFT) build --build-tests $(WERROR)
	scripts/check-units "$$($(SWIFT) build --show-bin-path)"
	scripts/check-install "$$($(SWIFT) build --show-bin-path)"
	$(SWIFT) test --no-parallel $(WERROR)

check-units:
	scripts/check-units "$$($(SWIFT) build --show-bin-path)"

check-install:
	scripts/check-install "$$($(SWIFT) build --show-bin-path)"

install: release install-files

# Copies what is built in $(BUILD_BIN); `make install` builds it first.
install-files:
	@test -x "$(BUILD_BIN)/locationd" || { echo "no locationd in '$(BUILD_BIN)'; run make install" >&2; exit 1; }
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(UNITDIR)" "$(DESTDIR)$(SYSUSERSDIR)" "$(DESTDIR)$(TMPFILESDIR)" \
		"$(DESTDIR)$(SYSCONFDIR)/locationd" "$(DESTDIR)$(DOCDIR)" "$(DESTDIR)$(SCENARIODIR)" \
		"$(DESTDIR)$(DATADIR)/bash-completion/completions" "$(DESTDIR)$(DATADIR)/zsh/site-functions" \
		"$(DESTDIR)$(DATADIR)/fish/vendor_completions.d"
	install -m 0755 "$(BUILD_BIN)/locationd" "$(BUILD_BIN)/locationctl" "$(BUILD_BIN)/locationd-mqtt" "$(DESTDIR)$(BINDIR)/"
	sed -e 's|^ExecStart=/usr/local/bin/|ExecStart=$(BINDIR)/|' -e 's|^ExecReload=/usr/local/bin/|ExecReload=$(BINDIR)/|' \
		-e 's|/etc/locationd/|$(SYSCONFDIR)/locationd/|g' \
		-e 's|file:/usr/local/share/doc/locationd/|file:$(DOCDIR)/|' systemd/locationd.service \
		> "$(DESTDIR)$(UNITDIR)/locationd.service"
	sed -e 's|file:/usr/local/share/doc/locationd/|file:$(DOCDIR)/|' systemd/locationd.socket \
		> "$(DESTDIR)$(UNITDIR)/locationd.socket"
	sed -e 's|^ExecStart=/usr/local/bin/|ExecStart=$(BINDIR)/|' -e 's|/etc/locationd/|$(SYSCONFDIR)/locationd/|g' \
		-e 's|file:/usr/local/share/doc/locationd/|file:$(DOCDIR)/|' systemd/locationd-mqtt.service \
		> "$(DESTDIR)$(UNITDIR)/locationd-mqtt.service"
	chmod 0644 "$(DESTDIR)$(UNITDIR)/locationd.service" "$(DESTDIR)$(UNITDIR)/locationd.socket" "$(DESTDIR)$(UNITDIR)/locationd-mqtt.service"
	install -m 0644 systemd/sysusers.d/locationd.conf "$(DESTDIR)$(SYSUSERSDIR)/locationd.conf"
	install -m 0644 systemd/tmpfiles.d/locationd.conf "$(DESTDIR)$(TMPFILESDIR)/locationd.conf"
	@# An edited config is never overwritten: the new default goes next to it.
	@for name in locationd.toml mqtt.toml; do \
		conf="$(DESTDIR)$(SYSCONFDIR)/locationd/$$name"; \
		if [ -e "$$conf" ] && ! cmp -s "Config/$$name" "$$conf"; then \
			install -m 0644 "Config/$$name" "$$conf.default"; \
			echo "kept $$conf (edited); the shipped default is $$conf.default"; \
		else \
			install -m 0644 "Config/$$name" "$$conf"; \
		fi; \
	done
	@# Every doc: they point to each other (privacy.md, regions.md, semantics.md, …).
	install -m 0644 README.md docs/*.md "$(DESTDIR)$(DOCDIR)/"
	install -m 0644 Scenarios/*.json "$(DESTDIR)$(SCENARIODIR)/"
	@[ "$(abspath $(BINDIR)/../share)" = "$(abspath $(DATADIR))" ] || \
		echo "note: locationctl looks for scenarios by name in $(abspath $(BINDIR)/../share)/locationd/scenarios, not $(SCENARIODIR); give their paths (locationctl simulate $(SCENARIODIR)/demo.json)" >&2
	"$(BUILD_BIN)/locationctl" --generate-completion-script bash > "$(DESTDIR)$(DATADIR)/bash-completion/completions/locationctl"
	"$(BUILD_BIN)/locationctl" --generate-completion-script zsh > "$(DESTDIR)$(DATADIR)/zsh/site-functions/_locationctl"
	"$(BUILD_BIN)/locationctl" --generate-completion-script fish > "$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/locationctl.fish"
	@echo "installed under $(DESTDIR)$(PREFIX). To run it (as root, without DESTDIR):"
	@echo "  systemd-sysusers && systemd-tmpfiles --create $(TMPFILESDIR)/locationd.conf"
	@echo "  systemctl daemon-reload && systemctl enable --now locationd.socket locationd.service"
	@echo "  usermod -aG location USER    # who may use the socket"
	@echo "  MQTT bridge: set [owntracks] topic in $(SYSCONFDIR)/locationd/mqtt.toml, then systemctl enable --now locationd-mqtt"

# The locationctl that `build` made: `swift run` without $(WERROR) would compile every module again.
demo: deps build
	@mkdir -p $(DEMO_DIR)
	"$$($(SWIFT) build --show-bin-path)/locationctl" simulate demo --output $(DEMO_LOG)
	@scripts/demo $(DEMO_LOG) $(DEMO_SOCK) $(SPEED)

# Benchmarks against gpsdecode, pynmea2 and gpspipe (docs/benchmarks.md); not part of `make test`.
bench:
	Benchmarks/compare.sh

# libFuzzer runs of the NMEA and request decoders, FUZZ_SECONDS each (CI runs 60).
FUZZ_SECONDS ?= 60
fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

# The daemon's function order (docs/benchmarks.md, "Footprint"): recorded from the release
# build and its link map, then linked in. A stale list costs idle memory, never correctness:
# re-record after changing the daemon, and measure with Benchmarks/footprint.py.
orderfile:
	rm -f .build-install/locationd.map
	$(SWIFT) build $(RELEASE) --product locationd -Xlinker -Map=.build-install/locationd.map
	python3 Benchmarks/orderfile.py "$$($(SWIFT) build $(RELEASE) --show-bin-path)/locationd" .build-install/locationd.map
	rm -f "$$($(SWIFT) build $(RELEASE) --show-bin-path)/locationd"
	$(SWIFT) build $(RELEASE) --product locationd

clean:
	rm -rf .build .build-install .build-fuzz .build-bench
