# mod_sndbuf_tune: build with apxs, test with Apache::Test.
#
#   make            build .libs/mod_sndbuf_tune.so
#   make install    install into Apache's module directory (DESTDIR honoured)
#   make test       install what is missing, build, run every test suite
#   make demo       install what is missing, build, start a demo server
#   make bench      WAN lab benchmarks; writes docs/benchmarks.md

APXS      ?= apxs
LIBEXECDIR = $(shell $(APXS) -q LIBEXECDIR 2>/dev/null)
SOURCES    = mod_sndbuf_tune.c sndbuf_config.c sndbuf_rules.c sndbuf_socket.c sndbuf_auto.c \
             sndbuf_status.c sndbuf_status_page.c \
             sndbuf_kernel.c
HEADERS    = sndbuf_tune.h sndbuf_kernel.h sndbuf_parse.h sndbuf_status.h
MODULE     = .libs/mod_sndbuf_tune.so

all: $(MODULE)

$(MODULE): $(SOURCES) $(HEADERS)
	$(APXS) -c -Wc,-Wall -Wc,-Wextra -o mod_sndbuf_tune.la $(SOURCES)

install: all
	$(APXS) -i -S LIBEXECDIR=$(DESTDIR)$(LIBEXECDIR) -n sndbuf_tune mod_sndbuf_tune.la

deps:
	scripts/ensure-deps

test: deps
	$(MAKE) all
	t/all

demo: deps
	$(MAKE) all
	scripts/demo start

demo-stop:
	scripts/demo stop

bench: deps
	$(MAKE) all
	bench/run $(BENCH_ARGS)

clean:
	rm -rf .libs *.o *.lo *.slo *.la
	-t/run -clean >/dev/null 2>&1

.PHONY: all install deps test demo demo-stop bench clean
