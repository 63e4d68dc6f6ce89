# Building and installing obsd the way packagers expect: `make && sudo make install`, with PREFIX
# (default /usr/local) and DESTDIR (a staging root) honoured, and `make uninstall` to undo it.
# `make install` builds release binaries first; `make install-files` installs what is already
# built (in BUILDDIR) and is what the install test runs.

PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/obsd
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
SYSTEMDSYSTEMUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSTEMDUSERUNITDIR ?= $(PREFIX)/lib/systemd/user

SWIFT ?= swift
CONFIGURATION ?= release
# The Swift standard library and Foundation linked in: at run time obsd needs only libsqlite3
# (libcurl4 in cluster mode), obsctl libsqlite3 and libmicrohttpd12.
SWIFTFLAGS ?= --static-swift-stdlib
BUILDDIR ?= .build/$(CONFIGURATION)

INSTALL ?= install
DOCS = README.md LICENSE NOTICE CHANGELOG.md
MANUALS = docs/cli.md docs/operations.md docs/protocol.md docs/expressions.md docs/library.md \
	docs/architecture.md docs/performance.md
# The units name the installed paths: the binary in BINDIR, the docs in DOCDIR.
UNIT_PATHS = -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/local/share/doc/obsd|$(DOCDIR)|g'

.PHONY: all build install install-files uninstall test

all: build

build:
	$(SWIFT) build -c $(CONFIGURATION) $(SWIFTFLAGS) --product obsd
	$(SWIFT) build -c $(CONFIGURATION) $(SWIFTFLAGS) --product obsctl
	$(SWIFT) build -c $(CONFIGURATION) $(SWIFTFLAGS) --product mangen

install: build
	$(MAKE) --no-print-directory install-files

install-files:
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)/config $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) \
		$(DESTDIR)$(FISHCOMPDIR) $(DESTDIR)$(SYSTEMDSYSTEMUNITDIR) $(DESTDIR)$(SYSTEMDUSERUNITDIR)
	$(INSTALL) -m 0755 $(BUILDDIR)/obsd $(BUILDDIR)/obsctl $(DESTDIR)$(BINDIR)/
	$(BUILDDIR)/mangen obsctl.1 > $(DESTDIR)$(MANDIR)/man1/obsctl.1
	$(BUILDDIR)/mangen obsd.8 > $(DESTDIR)$(MANDIR)/man8/obsd.8
	$(BUILDDIR)/mangen obsd.conf.5 config/obsd.conf.example > $(DESTDIR)$(MANDIR)/man5/obsd.conf.5
	$(BUILDDIR)/obsctl completion bash > $(DESTDIR)$(BASHCOMPDIR)/obsctl
	$(BUILDDIR)/obsctl completion zsh > $(DESTDIR)$(ZSHCOMPDIR)/_obsctl
	$(BUILDDIR)/obsctl completion fish > $(DESTDIR)$(FISHCOMPDIR)/obsctl.fish
	$(INSTALL) -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 0644 $(MANUALS) $(DESTDIR)$(DOCDIR)/docs/
	$(INSTALL) -m 0644 config/obsd.conf.example $(DESTDIR)$(DOCDIR)/config/
	for unit in obsd.service obsd.socket; do \
		sed $(UNIT_PATHS) config/$$unit > $(DESTDIR)$(SYSTEMDSYSTEMUNITDIR)/$$unit && \
		sed $(UNIT_PATHS) config/user/$$unit > $(DESTDIR)$(SYSTEMDUSERUNITDIR)/$$unit || exit 1; \
	done
	chmod 0644 $(DESTDIR)$(MANDIR)/man*/obs* $(DESTDIR)$(BASHCOMPDIR)/obsctl $(DESTDIR)$(ZSHCOMPDIR)/_obsctl \
		$(DESTDIR)$(FISHCOMPDIR)/obsctl.fish $(DESTDIR)$(SYSTEMDSYSTEMUNITDIR)/obsd.* $(DESTDIR)$(SYSTEMDUSERUNITDIR)/obsd.*

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/obsd $(DESTDIR)$(BINDIR)/obsctl \
		$(DESTDIR)$(MANDIR)/man1/obsctl.1 $(DESTDIR)$(MANDIR)/man8/obsd.8 $(DESTDIR)$(MANDIR)/man5/obsd.conf.5 \
		$(DESTDIR)$(BASHCOMPDIR)/obsctl $(DESTDIR)$(ZSHCOMPDIR)/_obsctl $(DESTDIR)$(FISHCOMPDIR)/obsctl.fish \
		$(DESTDIR)$(SYSTEMDSYSTEMUNITDIR)/obsd.service $(DESTDIR)$(SYSTEMDSYSTEMUNITDIR)/obsd.socket \
		$(DESTDIR)$(SYSTEMDUSERUNITDIR)/obsd.service $(DESTDIR)$(SYSTEMDUSERUNITDIR)/obsd.socket
	rm -rf $(DESTDIR)$(DOCDIR)

test:
	scripts/test
