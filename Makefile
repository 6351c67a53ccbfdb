# mod_sndbuf_tune: build with apxs, test with Apache::Test.
#
#   make            build .libs/mod_sndbuf_tune.so
#   make install    install into Apache's module directory (DESTDIR honoured)
#   make test       install what is missing, build, run every test suite
#   make unit       the control law, the triage and the network rules on
#                   their own (no network, no server)
#   make demo       install what the demo needs, build, show a slow download
#                   and its fix on an emulated path, start a demo server
#   make bench      WAN lab benchmarks; writes docs/benchmarks.md
#   make sanitize   ASan+UBSan and ThreadSanitizer builds (t/README.md)

APXS      ?= apxs
LIBEXECDIR = $(shell $(APXS) -q LIBEXECDIR 2>/dev/null)
SOURCES    = mod_sndbuf_tune.c sndbuf_conn.c sndbuf_config.c sndbuf_parse.c sndbuf_rules.c sndbuf_socket.c sndbuf_auto.c sndbuf_law.c \
             sndbuf_path.c sndbuf_status.c sndbuf_status_page.c \
             sndbuf_kernel.c sndbuf_triage.c
HEADERS    = sndbuf_tune.h sndbuf_law.h sndbuf_kernel.h sndbuf_parse.h sndbuf_status.h \
             sndbuf_triage.h
MODULE     = .libs/mod_sndbuf_tune.so

all: $(MODULE)

$(MODULE): $(SOURCES) $(HEADERS)
	$(APXS) -c -Wc,-Wall -Wc,-Wextra -o mod_sndbuf_tune.la $(SOURCES)

install: all
	install -d $(DESTDIR)$(LIBEXECDIR)
	$(APXS) -i -S LIBEXECDIR=$(DESTDIR)$(LIBEXECDIR) -n sndbuf_tune mod_sndbuf_tune.la

deps:
	scripts/ensure-deps

# make test: the module, then every suite (t/all). What the sections
# below add to TEST_FIRST (unit tests, the fuzzer's fixed time, the
# sanitizer builds) is t/all's first suite, beside the WAN labs: those
# need only the module, and take longest.
test: deps
	$(MAKE) all
	t/all

test-first:
	$(MAKE) -j2 --output-sync=target FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) \
	    $(TEST_FIRST)

demo:
	scripts/ensure-deps --demo
	$(MAKE) all
	scripts/demo start

demo-stop:
	scripts/demo stop

# The lab checks itself first (t/wan/README.md): a miss is reported, not
# fatal, so the figures that follow are read with it in mind.
bench: deps bench/path_cost
	$(MAKE) all
	t/wan/selftest || echo "make bench: the WAN lab missed a bound of its own (above)"
	bench/run $(BENCH_ARGS)

# What a look at the shared path table costs (bench/run's crowds part).
bench/path_cost: bench/path_cost.c $(PATH_STUBS) sndbuf_path.c \
                 sndbuf_kernel.c sndbuf_tune.h
	$(CC) -O2 -Wall -Wextra -I$(shell $(APXS) -q INCLUDEDIR) \
	    $(shell $(APR_CONFIG) --includes --cppflags) -o $@ $< \
	    t/helpers/httpd_stubs.c sndbuf_path.c sndbuf_kernel.c \
	    $(shell $(APR_CONFIG) --link-ld) -lpthread

clean:
	rm -rf .libs *.o *.lo *.slo *.la bench/path_cost
	-t/run -clean >/dev/null 2>&1

.PHONY: all install deps test test-first demo demo-stop bench clean

# ---------------------------------------------------------------------------
# The control law (sndbuf_law.c), pure: exact decisions for constructed
# looks (t/unit/law_cases.c), its promise on modelled paths
# (t/unit/law_paths.c), and looks recorded in the WAN lab
# (t/unit/replay.c, t/unit/looks), under ASan and UBSan, in a second.
# The triage (sndbuf_triage.c), pure too: its verdicts and words for
# recorded and constructed figures (t/unit/triage_cases.c).
# ---------------------------------------------------------------------------

t/unit/%: t/unit/%.c t/unit/tap.h sndbuf_law.c sndbuf_law.h
	$(PARSE_CC) $(PARSE_CFLAGS) -o $@ $< sndbuf_law.c

t/unit/triage_cases: t/unit/triage_cases.c t/unit/tap.h sndbuf_triage.c \
                     sndbuf_triage.h
	$(PARSE_CC) $(PARSE_CFLAGS) -o $@ $< sndbuf_triage.c

# The network rules (sndbuf_rules.c) against APR's own matching, which
# Require ip uses: APR and httpd's headers, no server.
APR_CONFIG = $(shell $(APXS) -q APR_CONFIG 2>/dev/null || echo apr-1-config)
t/unit/rules_cases: t/unit/rules_cases.c t/unit/tap.h sndbuf_rules.c \
                    sndbuf_parse.c sndbuf_tune.h sndbuf_parse.h
	$(PARSE_CC) $(filter-out -std=c99,$(PARSE_CFLAGS)) \
	    -I$(shell $(APXS) -q INCLUDEDIR) \
	    $(shell $(APR_CONFIG) --includes --cppflags) -o $@ $< \
	    sndbuf_rules.c sndbuf_parse.c $(shell $(APR_CONFIG) --link-ld)

# The shared segment (sndbuf_path.c) with httpd's startup calls stubbed
# and a clock of the test's own.
PATH_STUBS = t/helpers/httpd_stubs.c t/helpers/httpd_stubs.h
t/unit/path_cases: t/unit/path_cases.c t/unit/tap.h sndbuf_path.c \
                   sndbuf_tune.h $(PATH_STUBS)
	$(PARSE_CC) $(filter-out -std=c99,$(PARSE_CFLAGS)) \
	    -I$(shell $(APXS) -q INCLUDEDIR) \
	    $(shell $(APR_CONFIG) --includes --cppflags) -o $@ $< \
	    sndbuf_path.c t/helpers/httpd_stubs.c $(shell $(APR_CONFIG) --link-ld)

# The law's promise on modelled paths: the law and the shared segment
# together, the segment on the model's clock.
t/unit/law_paths: t/unit/law_paths.c t/unit/tap.h sndbuf_law.c \
                  sndbuf_law.h sndbuf_path.c sndbuf_tune.h $(PATH_STUBS)
	$(PARSE_CC) $(filter-out -std=c99,$(PARSE_CFLAGS)) \
	    -I$(shell $(APXS) -q INCLUDEDIR) \
	    $(shell $(APR_CONFIG) --includes --cppflags) -o $@ $< \
	    sndbuf_law.c sndbuf_path.c t/helpers/httpd_stubs.c \
	    $(shell $(APR_CONFIG) --link-ld)

# replay: the recordings of t/unit/looks (real looks from the WAN lab).
UNIT = t/unit/law_cases t/unit/law_paths t/unit/replay t/unit/triage_cases \
       t/unit/rules_cases t/unit/path_cases
unit: $(UNIT)
	prove --exec '' $(UNIT)

# make test runs it before the suites.
TEST_FIRST += unit

unit-clean:
	rm -f $(UNIT)

clean: unit-clean

.PHONY: unit unit-clean

# ---------------------------------------------------------------------------
# Parsers (sndbuf_parse.c): a unit check and a fuzzer (fuzz/README.md).
#
#   make parse-check    the exact reason and value for a table of inputs (gcc)
#   make fuzz           libFuzzer + ASan + UBSan for FUZZ_SECONDS (default 60;
#                       20 under make test)
#                       on a copy of fuzz/corpus; fails on any crash.  Needs
#                       clang and libclang-rt-14-dev (libFuzzer, sanitizers).
# ---------------------------------------------------------------------------

PARSE_CC     ?= gcc
PARSE_CFLAGS  = -std=c99 -g -O1 -Wall -Wextra \
                -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CC      ?= clang
FUZZ_CFLAGS   = -g -O1 -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all -Wall -Wextra
FUZZ_SECONDS ?= 60
FUZZ_ARGS    ?=

fuzz/parse_cases: fuzz/parse_cases.c sndbuf_parse.c sndbuf_parse.h
	$(PARSE_CC) $(PARSE_CFLAGS) -o $@ fuzz/parse_cases.c sndbuf_parse.c

parse-check: fuzz/parse_cases
	fuzz/parse_cases

fuzz/fuzz_parsers: fuzz/fuzz_parsers.c sndbuf_parse.c sndbuf_parse.h
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz: no $(FUZZ_CC):" \
	    "apt-get install clang libclang-rt-14-dev" >&2; exit 1; }
	@rt=$$($(FUZZ_CC) --print-runtime-dir); \
	ls "$$rt"/libclang_rt.fuzzer*.a >/dev/null 2>&1 || { echo "make fuzz:" \
	    "no libFuzzer in $$rt: apt-get install libclang-rt-14-dev" >&2; exit 1; }
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_parsers.c sndbuf_parse.c

# The corpus is copied, so what the fuzzer adds to it stays out of git.
# On a crash the reproducer (crash-*) and the log stay in fuzz/artifacts/,
# which git ignores; delete them once the bug is fixed.
fuzz: fuzz/fuzz_parsers
	@echo "fuzz/fuzz_parsers: $(FUZZ_SECONDS) s on a copy of fuzz/corpus"
	@work=$$(mktemp -d) || exit 1; mkdir -p "$$work/corpus" fuzz/artifacts; \
	cp fuzz/corpus/* "$$work/corpus/" || exit 1; \
	fuzz/fuzz_parsers -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -dict=fuzz/parsers.dict -artifact_prefix=fuzz/artifacts/ \
	    $(FUZZ_ARGS) "$$work/corpus" >"$$work/log" 2>&1; \
	rc=$$?; \
	grep -E '^(Done|stat::(number_of_executed|average_exec|peak_rss))' "$$work/log"; \
	if [ $$rc -ne 0 ]; then \
	    tail -n 40 "$$work/log"; cp "$$work/log" fuzz/artifacts/fuzz.log; \
	    echo; echo "make fuzz: FAILED (exit $$rc): see fuzz/artifacts/" >&2; \
	fi; \
	rm -rf "$$work"; rmdir fuzz/artifacts 2>/dev/null; exit $$rc

# make test runs both before the suites, the fuzzer for 20 s (the corpus,
# then new inputs; a longer hunt is make fuzz, or FUZZ_SECONDS=3600 make
# fuzz); make clean removes what they built.
TEST_FUZZ_SECONDS = 20
TEST_FIRST += parse-check fuzz

fuzz-clean:
	rm -rf fuzz/fuzz_parsers fuzz/parse_cases fuzz/artifacts

clean: fuzz-clean

.PHONY: parse-check fuzz fuzz-clean

# ---------------------------------------------------------------------------
# Sanitizer builds of the module, for t/sanitized (t/README.md). Each
# is built by apxs in its own directory (links to the sources), so the
# ordinary build (.libs/) is untouched.
#
#   make sanitize   build/asan/mod_sndbuf_tune.so   ASan + UBSan (clang)
#                   build/tsan/mod_sndbuf_tune.so   ThreadSanitizer (gcc)
#                   build/tsan_pools.so             TSan sees APR pools
#
# ThreadSanitizer is gcc's: clang 14's TSan runtime, preloaded into
# apache2, crashes before main on Debian 12. A compiler warning fails
# either build, so the ASan one checks that clang builds the module as
# cleanly as gcc does.
# ---------------------------------------------------------------------------

SAN_CFLAGS  = -Wc,-g -Wc,-O1 -Wc,-fno-omit-frame-pointer \
              -Wc,-Wall -Wc,-Wextra -Wc,-Werror
SAN_asan    = -S CC=clang -Wc,-fsanitize=address,undefined \
              -Wc,-fno-sanitize-recover=undefined
SAN_tsan    = -Wc,-fsanitize=thread
SAN_MODULES = build/asan/mod_sndbuf_tune.so build/tsan/mod_sndbuf_tune.so \
              build/tsan_pools.so

sanitize: $(SAN_MODULES)

build/%/mod_sndbuf_tune.so: $(SOURCES) $(HEADERS)
	@[ "$*" != asan ] || command -v clang >/dev/null || { echo "make sanitize:" \
	    "no clang: apt-get install clang libclang-rt-14-dev" >&2; exit 1; }
	rm -rf build/$* && mkdir -p build/$*
	cd build/$* && for f in $(SOURCES) $(HEADERS); do ln -s ../../$$f .; done
	cd build/$* && $(APXS) $(SAN_$*) -c $(SAN_CFLAGS) -o mod_sndbuf_tune.la \
	    $(SOURCES) >build.log 2>&1 || { cat build.log; exit 1; }
	cp build/$*/.libs/mod_sndbuf_tune.so $@

build/tsan_pools.so: t/helpers/tsan_pools.c
	mkdir -p build
	gcc -shared -fPIC -g -O1 -Wall -Wextra -fsanitize=thread -o $@ $< -ldl

# make test runs the suites a second time on these (t/all).
TEST_FIRST += sanitize

sanitize-clean:
	rm -rf build

clean: sanitize-clean

.PHONY: sanitize sanitize-clean
