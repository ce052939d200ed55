# newsletter: see README.md. `make run` and `make test` need nothing but Go.
GO        ?= go
BIN       ?= bin/newsletter
FUZZTIME  ?= 10s
ITEMS     ?= 1,20
FANOUT_N  ?= 20000
ISOLATION_ROUNDS ?= 3

.PHONY: help run build test test-stress vet fuzz bench bench-subscribe bench-send bench-digest bench-issue bench-push bench-archive bench-redirect bench-fanout bench-isolation bench-sms bench-mobile bench-scale bench-segment bench-list bench-login bench-inbox bench-ack soak up down logs e2e clean

# run builds and execs the binary rather than `go run`: go run exits 1 on
# any interrupt, so Ctrl-C would end in make's "Error 1" after a clean stop.
# It says before it builds that the first build takes minutes: a fresh
# machine downloads and compiles every dependency, silently.
help: ## this list: every target and what it does
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /\1\t/' | awk -F'\t' '{printf "  make %-16s %s\n", $$1, $$2}'

run: ## the service on its embedded default (in-memory Redis, dev mailbox)
	@echo "make run: building $(BIN) first. The first build on a machine downloads and compiles the dependencies: a few minutes with no output. Later builds take seconds."
	@$(MAKE) --no-print-directory build
	exec $(BIN) serve

build: ## a static binary in bin/ (BIN=path puts it elsewhere)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/newsletter

# TEST_FIRST: go test runs the packages' test binaries in the order they
# are named (./... adds the rest, each once), as many at a time as there
# are cores. The longest come first, so the suite does not end waiting on
# a long package that started last: cmd/newsletter alone takes over half
# of the suite's time, and in path order it started only after most of
# the others had run one by one beside it.
TEST_FIRST = ./cmd/newsletter ./bench ./api/console ./store ./services/issues ./worker ./api ./mailer ./internal/redisconn

# -timeout: go test's default of 10 minutes a package is near the command
# package's time on a busy machine when its tests run one after another
# (NEWSLETTER_TEST_REDIS_URL set and no redis-server: docs/development.md;
# its kill and restart tests wait out asynq's recovery by design); a hung
# test still fails, later.
test: vet ## every test with the race detector, then a short fuzz run
	$(GO) test -race -count=1 -timeout=15m $(TEST_FIRST) ./...
	$(GO) test -run='^$$' -fuzz=FuzzNormalize -fuzztime=$(FUZZTIME) ./internal/address

vet: ## gofmt, go vet, and errcheck (pinned in go.mod as a tool; .errcheck-excludes says what it may skip)
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed:"; gofmt -l .; exit 1)
	$(GO) vet ./...
	$(GO) tool errcheck -ignoretests -exclude .errcheck-excludes ./...

test-stress: ## the short tests three times under -race, beside two CPU-bound processes (a busy 2-core machine); the issue lifecycle model runs 2,000 steps; then, the hogs stopped, the soak for 5 minutes (Redis 7960-7961, Sentinels 27960-27962; fails when an invariant is breached)
	@set -e; \
	( while :; do :; done ) & hog1=$$!; \
	( while :; do :; done ) & hog2=$$!; \
	trap 'kill $$hog1 $$hog2 2>/dev/null' EXIT INT TERM; \
	NEWSLETTER_MODEL_STEPS=2000 $(GO) test -race -short -count=3 -timeout=20m ./...; \
	kill $$hog1 $$hog2; trap - EXIT INT TERM; \
	SOAK=5m SOAK_REDIS_PORT=$(or $(SOAK_REDIS_PORT),7960) SOAK_SENTINEL_PORT=$(or $(SOAK_SENTINEL_PORT),27960) $(GO) run ./bench/soak

fuzz: ## a longer fuzz run of address normalisation
	$(GO) test -run='^$$' -fuzz=FuzzNormalize -fuzztime=5m ./internal/address

bench: bench-subscribe bench-send bench-digest bench-issue bench-push bench-archive bench-redirect bench-fanout bench-isolation bench-sms bench-mobile bench-login bench-inbox bench-ack ## every benchmark, one after another

bench-subscribe: ## POST /subscribe rate vs raw asynq enqueue rate (needs a Redis, default 127.0.0.1:6379 db 15)
	$(GO) run ./bench/subscribe

bench-ack: ## issue #45: POST /subscribe with NEWSLETTER_REDIS_ACK_REPLICAS 0 and 1 in alternating pairs (PAIRS, default 3, BENCH_DURATION each, default 10s) on a Redis primary and replica of its own (redis-server; PORT_BASE and the next port, free ones when unset): signups/s, p50, p99 and the primary's CPU per signup
	$(GO) run ./bench/ack

clean: ## remove bin/
	rm -rf bin

bench-send: ## mails/s through the SMTP pool (1, 4, 16 connections) vs a bare SMTP loop, loopback sink
	$(GO) run ./bench/send

bench-archive: ## GET /archive/{slug} and /archive/feed.atom requests/s and p99 from the API role alone (cached pages), next to /healthz (needs a Redis, default 127.0.0.1:6379 db 15)
	$(GO) run ./bench/archive

bench-login: ## issue #41: N sign-ins at once (default 1000) to POST /admin/login of the API role in its own process, each from its own client address: peak RSS (VmHWM, target < 300 MB), answers by status and the 503s of the capped password hashes (needs a Redis, default 127.0.0.1:6379 db 15)
	N=$(or $(N),1000) $(GO) run ./bench/login

bench-inbox: ## issue #44: STREAMS event streams (default 10000) open on one inbox server process (net/http, its own process; raw TCP clients): RSS and Go heap+stacks per stream (target < 20 KB); one event to N readers (default 100000) through Channel.Send (batches of 100, 8 goroutines): first Send to the last stream's message, writes/s, Redis CPU and memory per message (needs a Redis, default 127.0.0.1:6379 db 15)
	N=$(or $(N),100000) STREAMS=$(or $(STREAMS),10000) $(GO) run ./bench/inbox

bench-redirect: ## GET /r/{token} (the counted redirect) requests/s and p99 from the API role alone, its counting written to Redis included (needs a Redis, default 127.0.0.1:6379 db 15)
	$(GO) run ./bench/redirect

bench-fanout: ## Redis CPU per recipient and channel of one event fanned out to N readers (default 20000) with e-mail and a browser each (needs a Redis, default 127.0.0.1:6379 db 15)
	N=$(or $(N),$(FANOUT_N)) $(GO) run ./bench/fanout

bench-isolation: ## issue #31: the e-mail of one event to 2,000 readers (each with a browser, an app and a number) beside healthy providers and beside every other provider in trouble (web push and SMS hung, APNs 503, FCM slow), rounds alternated: the e-mail lane's time in each round, the medians and troubled/healthy (ISOLATION_ROUNDS, default 3; embedded Redis unless NEWSLETTER_TEST_REDIS_URL)
	ROUNDS=$(ISOLATION_ROUNDS) $(GO) test -run='^$$' -bench=LaneIsolation -benchtime=1x -count=1 ./cmd/newsletter

bench-push: ## encrypted web push notifications/s and CPU per notification through push.Client (32 senders) into a local push service, vs a bare encrypt-and-post loop
	$(GO) run ./bench/push

bench-sms: ## issue #31: N texts (default 20000) as sms:deliver tasks through the sms lane (a worker of 16) into a local Twilio-shaped gateway, beside a bare sms.Client.Send loop of 16 goroutines: texts/s, worker CPU and Redis CPU per text (needs a Redis, default 127.0.0.1:6379 db 15)
	N=$(or $(N),20000) $(GO) run ./bench/sms

bench-mobile: ## issue #31: N app pushes (default 20000, half FCM, half APNs) as push:deliver tasks through the push lane (32 workers, 8 slots a platform) into local FCM and APNs fakes, beside bare fcm and apns Client.Send loops: pushes/s, worker CPU and Redis CPU per push (needs a Redis, default 127.0.0.1:6379 db 15)
	N=$(or $(N),20000) $(GO) run ./bench/mobile

bench-digest: ## one digest per item count (ITEMS, default 1,20) to the digest topic of N subscribers (default 100000; every UPDATES_ONLY-th, default 5, has updates only) through a worker into a loopback sink: rate, CPU per mail (worker, Redis, a bare loop at the same size, the sink), Redis requests per mail, memory, DKIM's cost per mail (DKIM=rsa,ed25519,both: the last digest again, signed), system calls and bytes written per mail beside the bare loop's (SINK=plain: a sink offering no PIPELINING and no CHUNKING)
	N=$(or $(N),100000) ITEMS=$(ITEMS) UPDATES_ONLY=$(UPDATES_ONLY) DKIM=$(DKIM) SINK=$(SINK) $(GO) run ./bench/digest

bench-issue: ## one issue (Markdown, the 20-item digest's size) to the digest topic of N subscribers (default 1000000) through bench-digest's harness, beside a 20-item digest in the same run: mails/s, worker and Redis CPU per mail, and how often the Markdown was rendered
	N=$(or $(N),1000000) ITEMS=20 UPDATES_ONLY=$(UPDATES_ONLY) ISSUE=1 $(GO) run ./bench/digest

bench-scale: ## issue #30: N subscribers (default 1000000) on a local 3+3 Redis Cluster and a single Redis beside it (redis-server, ports 7800-7899, PORT_BASE moves them), grown through the store's bulk path to each of CHECKPOINTS (default 1000000,2000000,5000000,10000000, capped at N): import rate, Redis memory per subscriber, the issue planner's count and walk in ns per reader, Redis CPU per mail per primary sending an issue through `newsletter serve` into a loopback sink (SINGLE_MAX caps the single Redis's list, MAILS and WINDOW the send window)
	N=$(or $(N),1000000) CHECKPOINTS=$(CHECKPOINTS) SINGLE_MAX=$(SINGLE_MAX) MAILS=$(MAILS) WINDOW=$(WINDOW) $(GO) run ./bench/scale

bench-segment: ## issue #32: N subscribers (default 1000000) loaded through the store's bulk path with their tags, then a segment of three terms (topic:updates AND tag:beta AND NOT tag:paid) counted ROUNDS times (default 10; target under 200 ms), the same with a join date, and the segment's readers walked as the issue planner does (needs a Redis, default 127.0.0.1:6379 db 15)
	N=$(or $(N),1000000) ROUNDS=$(ROUNDS) $(GO) run ./bench/segment
bench-list: ## issue #32: N subscribers (default 1000000) seeded into REDIS_URL (a Redis of its own: the database is flushed), then the prefix search's p50/p99 (QUERIES, default 2000) and the CSV export's rows/s with the peak heap and RSS
	N=$(or $(N),1000000) QUERIES=$(QUERIES) REDIS_URL=$(REDIS_URL) $(GO) run ./bench/list

soak: ## chaos soak (docs/operating.md, The soak): two of each role on Redis+replica+Sentinel, mail through toxiproxy, load and overlapping faults for SOAK (default 30m), then the invariants; report and plot in soak-report/<time>/ (SOAK_REDIS_PORT 7900-7901, SOAK_SENTINEL_PORT 27900-27902, SOAK_RATE ops/s; SOAK_CLUSTER=1: a 3+3 Redis Cluster on SOAK_REDIS_PORT..+5, bus ports SOAK_SENTINEL_PORT..+5, a primary killed as the Redis fault); texts through a second proxy into the SMS fake; one worker's clock skewed
	SOAK=$(or $(SOAK),30m) $(GO) run ./bench/soak

up: ## docker compose: Redis (AOF), the service, Mailpit, Prometheus, Grafana
	docker compose up -d --build
	@echo "form http://localhost:8080  mail http://localhost:8025  prometheus http://localhost:9090  grafana http://localhost:3000"

down: ## stop the docker compose stack
	docker compose down

logs: ## follow the docker compose stack's logs
	docker compose logs -f newsletter

e2e: ## the TestE2E browser tests (the signup pages, an issue's archive page, web push) in headless Chromium (Debian's chromium; skipped when none is installed)
	$(GO) test -count=1 -run TestE2E -v ./cmd/newsletter
