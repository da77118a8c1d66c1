# lfmq — build, test, demo, benchmarks, fuzzing and lint.
# The two set-up commands are `make demo` and `make test`.

GO       ?= go
BIN      ?= bin/lfmq
DEMO_OUT ?= demo-out
FUZZTIME ?= 30s
# The tests need no cgo; builds are pure Go.
export CGO_ENABLED = 0

.PHONY: all build test test-long test-race test-arm64 test-fma check-goldens demo bench fuzz lint sums clean

all: build

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/lfmq

test:
	$(GO) test -count=1 -timeout 15m ./...
	# The pure-Go kernel fallback must give the same bits as the assembly.
	$(GO) test -count=1 -tags purego ./engine/kernels

test-long:
	$(GO) test -count=1 -timeout 60m -tags long ./...

# test-race: the race detector on the packages that run goroutines (the
# engine and its server, quantization, scoring, verification, the commands'
# serve/launch/progress paths). -race needs cgo, so this target alone builds
# with CGO_ENABLED=1 and a C toolchain (Debian: gcc libc6-dev); the product
# binary stays pure Go. The race detector makes code 5-10x slower, so a few
# packages run a selection: the kernels without TestProducts (exhaustive
# single-threaded products), quant's one default GPTQ run (TestGPTQTiny)
# and the RTN worker pool, scoring's cache and served paths, and the
# commands' serve, launch and status-line tests without
# TestServedScoreEqualsInProcess (its chat clients load the server for as
# long as scoring runs: minutes under -race; engine/api covers the server),
# and the server without TestLoad (16 clients × 50 requests).
RACE = CGO_ENABLED=1 $(GO) test -race -count=1 -short -timeout 20m
test-race:
	@command -v $${CC:-cc} >/dev/null || { echo "test-race: no C compiler (cc) for cgo; install gcc and libc6-dev" >&2; exit 1; }
	$(RACE) ./engine/tokenizer ./engine/chat ./engine/model ./engine/sched \
		./format/lfmq1 ./format/safetensors ./quant/hessian ./verify/... ./hub/... ./release/... ./format/sshsig ./launch ./bench
	$(RACE) -skip '^TestLoad$$' ./engine/api
	$(RACE) -skip '^TestProducts$$' ./engine/kernels
	$(RACE) -run '^(TestQuantizeDeterministic|TestGPTQTiny)$$' ./quant
	$(RACE) -run '^(TestRunCache|TestServedEqualsInProcess)$$' ./evidence/score
	$(RACE) -run '^(TestServe|TestLaunch|TestStatusLinesEndWithTheWork$$|TestLineProgress$$)' \
		-skip '^TestServedScoreEqualsInProcess$$' ./cmd/lfmq

# test-arm64: "the same bits on every platform", run rather than assumed:
# the kernels', codec's and GPTQ solver's tests and the engine's reference
# tests built for GOARCH=arm64 (the pure-Go kernels) and run under
# qemu-user (Debian: qemu-user or qemu-user-static). TestLogitsBits checks the logits of the
# BF16 fixture and of its RTN checkpoint against one committed golden of
# their float32 bits that amd64 (make test) matches too. About 3 minutes
# on 2 cores; TestProducts runs in -short mode.
# The engine's test binary loads GPU libraries with purego, which links a
# Linux binary against the C loader even with CGO_ENABLED=0: qemu finds the
# arm64 loader under QEMU_LD_PREFIX (Debian: libc6-arm64-cross).
QEMU_AARCH64 ?= $(shell command -v qemu-aarch64 || command -v qemu-aarch64-static)
QEMU_LD_PREFIX ?= /usr/aarch64-linux-gnu
ARM64 = QEMU_LD_PREFIX=$(QEMU_LD_PREFIX) GOARCH=arm64 $(GO) test -count=1 -short -timeout 20m -exec $(QEMU_AARCH64)
test-arm64:
	@test -n "$(QEMU_AARCH64)" || { echo "test-arm64: no qemu-aarch64 or qemu-aarch64-static; install qemu-user" >&2; exit 1; }
	@test -e $(QEMU_LD_PREFIX)/lib/ld-linux-aarch64.so.1 || { echo "test-arm64: no arm64 C loader under $(QEMU_LD_PREFIX); install libc6-arm64-cross" >&2; exit 1; }
	$(ARM64) ./engine/kernels ./format/bfp ./quant/gptq
	$(ARM64) -run '^(TestLogitsBits|TestReferenceLogits|TestReferenceHiddenStates)$$' ./engine/model

# test-fma: the pure-Go kernels built with GOAMD64=v3, where the compiler
# may fuse a multiply and an add into one FMA, even across statements (Go
# spec, Floating-point operators), unless a conversion rounds the product:
# one such fusion in gptq.NewFactor gave other bits on arm64 and v3. The
# bit-exact packages' tests, the engine's logits bits and the GPTQ golden
# bytes must hold as on v1. Runs natively on any CPU with AVX2 and FMA
# (x86-64-v3); about 2 minutes on 2 cores.
FMA = GOAMD64=v3 $(GO) test -count=1 -short -timeout 20m -tags purego
test-fma:
	@grep -qw fma /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo || { echo "test-fma: this CPU cannot run GOAMD64=v3 code (no AVX2/FMA)" >&2; exit 1; }
	$(FMA) ./engine/kernels ./format/bfp ./quant/gptq ./quant/hessian
	$(FMA) -run '^(TestLogitsBits|TestReferenceLogits|TestReferenceHiddenStates)$$' ./engine/model
	$(FMA) -run '^TestGoldenBytes$$' ./quant

# check-goldens: the chat template goldens against Python Jinja2 (needs
# python3 with Jinja2 3.1, Debian's python3-jinja2), independently of the Go
# renderer that wrote them. Fails when a golden differs from what Jinja2 renders,
# when a generated assembly file differs from what its engine/kernels/gen
# script writes, or when the device kernels' PTX differs from what clang-14
# with libclc-14 compiles kernels.cl to (scripts/gen-ptx.sh).
# -B: no __pycache__ under testdata/ (TestSHA256SUMS lists every file there).
PYTHON ?= python3
check-goldens:
	$(PYTHON) -B engine/chat/testdata/check_lfm25_golden.py
	$(PYTHON) -B engine/chat/testdata/gen_jinja2_cases.py --check
	$(PYTHON) -B engine/kernels/gen/tile512.py | cmp - engine/kernels/tile512_amd64.s
	$(PYTHON) -B engine/kernels/gen/swiglu.py | cmp - engine/kernels/swiglu_amd64.s
	$(PYTHON) -B engine/kernels/gen/pairs.py | cmp - engine/kernels/bfp512pairs_amd64.s
	$(PYTHON) -B engine/kernels/gen/expshift.py | cmp - engine/kernels/expshift_amd64.s
	$(PYTHON) -B engine/kernels/gen/attn4.py | cmp - engine/kernels/attn4_amd64.s
	scripts/gen-ptx.sh --check

# ptx: rebuild the device kernels' PTX (engine/device/kernels.ptx) after a
# change to engine/device/kernels.cl (needs clang-14 and libclc-14).
.PHONY: ptx
ptx:
	scripts/gen-ptx.sh

TINY     = testdata/tiny-lfm2-moe
# DENSE is the dense LFM2 fixture; it shares TINY's tokenizer, so TINY's
# calibration set and corpora serve it too.
DENSE    = testdata/tiny-lfm2
# DRAFTER is the DSpark drafter trained for TINY.
DRAFTER  = testdata/tiny-lfm2-moe-dspark/model
DEMO_CHAT = '[{"role":"user","content":"What does the ls command do?"}]'

EVAL     = $(foreach c,chat instruct code book,--eval-corpus $(c)=$(TINY)/corpora/$(c).jsonl)

CORPORA  = $(foreach c,chat instruct code book,--corpus $(c)=$(TINY)/corpora/$(c).jsonl)
# The demo scores the first DEMO_RECORDS records of each corpus (0 = all;
# all four corpora take 6-8 minutes on 2 cores).
DEMO_RECORDS ?= 16

# demo: the whole pipeline on the tiny model in testdata/: quantize with GPTQ
# (the product), RTN (the baseline) and two ablations (GPTQ on the experts
# only, BF16 experts), inspect,
# generate, score against BF16, quantize the dense fixture and generate from
# it, run the word-problem task against lfmq serve and check the texts gate,
# check the same gate with the DSpark drafter on and off, build and verify a release (its card shows the task table and the gate),
# detect tampering, launch the release and score the running server.
demo: build
	rm -rf $(DEMO_OUT)/tiny-lfm2-moe-gptq $(DEMO_OUT)/tiny-lfm2-moe-gptq-experts $(DEMO_OUT)/tiny-lfm2-moe-rtn $(DEMO_OUT)/tiny-lfm2-moe-bf16-experts $(DEMO_OUT)/tiny-lfm2-gptq $(DEMO_OUT)/evidence $(DEMO_OUT)/eval $(DEMO_OUT)/launch $(DEMO_OUT)/drafter
	@echo "== quantize with GPTQ on the fixture's calibration set"
	$(BIN) quantize --model $(TINY)/model --out $(DEMO_OUT)/tiny-lfm2-moe-gptq \
		--calib $(TINY)/calibration/calibration.jsonl --calib-seqs 128 $(EVAL)
	@echo "== quantize with GPTQ on the experts only (ablation: the BFP8 tensors rounded to nearest)"
	$(BIN) quantize --model $(TINY)/model --out $(DEMO_OUT)/tiny-lfm2-moe-gptq-experts --dense-method rtn \
		--calib $(TINY)/calibration/calibration.jsonl --calib-seqs 128 $(EVAL)
	@echo "== quantize with RTN"
	$(BIN) quantize --model $(TINY)/model --out $(DEMO_OUT)/tiny-lfm2-moe-rtn --method rtn
	@echo "== quantize with BF16 experts (ablation: only the dense weights in BFP8)"
	$(BIN) quantize --model $(TINY)/model --out $(DEMO_OUT)/tiny-lfm2-moe-bf16-experts --method rtn --experts keep
	$(BIN) inspect $(DEMO_OUT)/tiny-lfm2-moe-gptq
	@echo
	@echo "== generate, BF16 source"
	$(BIN) generate --model $(TINY)/model --chat $(DEMO_CHAT) --max-tokens 40 --stats
	@echo "== generate, lfmq-1 GPTQ"
	$(BIN) generate --model $(DEMO_OUT)/tiny-lfm2-moe-gptq --chat $(DEMO_CHAT) --max-tokens 40 --stats
	@echo
	@echo "== score against the BF16 reference ($(DEMO_RECORDS) records per corpus; f32 KV cache, so the rows measure the weights alone)"
	$(BIN) score --kv-cache-dtype f32 --reference $(TINY)/model --candidate bf16-experts=$(DEMO_OUT)/tiny-lfm2-moe-bf16-experts \
		--candidate rtn=$(DEMO_OUT)/tiny-lfm2-moe-rtn --candidate gptq-experts=$(DEMO_OUT)/tiny-lfm2-moe-gptq-experts \
		--candidate gptq=$(DEMO_OUT)/tiny-lfm2-moe-gptq \
		$(CORPORA) --max-records $(DEMO_RECORDS) --noise-floor \
		--out $(DEMO_OUT)/evidence/score-tiny.json --plot $(DEMO_OUT)/evidence
	@echo
	@echo "== dense LFM2 (model_type lfm2): quantize the dense fixture with GPTQ (FFN in BFP4), generate"
	@echo "   (its FFNs were rebuilt from the MoE fixture's experts without training: its text repeats itself)"
	$(BIN) quantize --model $(DENSE)/model --out $(DEMO_OUT)/tiny-lfm2-gptq \
		--calib $(TINY)/calibration/calibration.jsonl --calib-seqs 32 $(EVAL)
	$(BIN) generate --model $(DEMO_OUT)/tiny-lfm2-gptq --chat $(DEMO_CHAT) --max-tokens 40 --stats
	@echo
	@echo "== task evidence: word problems against lfmq serve (speculation on and off, concurrency 1 and 4), the texts gate, multiple choice"
	scripts/demo-eval.sh $(BIN) $(DEMO_OUT)/tiny-lfm2-moe-gptq testdata/eval/word-problems.jsonl testdata/eval/choice.jsonl \
		$(DEMO_OUT)/evidence $(DEMO_OUT)/eval
	@echo
	@echo "== drafted decoding with the fixture's DSpark drafter: the same texts on and off, greedy and seeded, 1 and 16 at once"
	scripts/demo-drafter.sh $(BIN) $(DEMO_OUT)/tiny-lfm2-moe-gptq $(DRAFTER) testdata/eval/word-problems.jsonl $(DEMO_OUT)/drafter
	@echo
	@echo "== release: build, verify, tamper"
	scripts/demo-release.sh $(BIN) $(DEMO_OUT)/tiny-lfm2-moe-gptq $(DEMO_OUT)/evidence $(DEMO_OUT)/release-demo
	@echo
	@echo "== launch the release (agentic preset), ask it over the OpenAI API, score the running server"
	scripts/demo-launch.sh $(BIN) $(DEMO_OUT)/release-demo/release $(TINY)/model $(TINY)/corpora/chat.jsonl $(DEMO_OUT)/launch
	@echo
	@echo "demo outputs in $(DEMO_OUT)/: checkpoints tiny-lfm2-moe-{gptq,gptq-experts,rtn,bf16-experts} and tiny-lfm2-gptq, evidence/, release-demo/release"

# bench: every benchmark, one package at a time (-p 1: benchmarks of two
# packages running side by side would disturb each other); see docs/development.md for how
# to compare runs. The engine's decode and prefill benchmarks write a 2.6 GB
# synthetic checkpoint with the real model's layer shapes and a 2.34 GB one of
# dense LFM2-1.2B to a temporary directory and remove them at the end (set
# LFMQ_BENCH_SYNTH_DIR to keep them between runs). About 10 minutes on 2 idle
# cores before the dense model was added; writing and quantizing it took 4
# minutes on 2 busy cores, its benchmarks (-benchtime 3s) 7 more. The synthetic LFM3-1.7B
# (docs/lfm3.md, "Speed") took 2 minutes to write and 8 to quantize on 2 busy cores; its decode
# and prefill at depths to 131,072 take about 10 more. BENCH selects benchmarks
# and BENCHCOUNT repeats them, e.g. make bench BENCH=Decode BENCHCOUNT=3.
# engine/sched's BenchmarkDraftedDecode (docs/drafting-speed.md) writes BF16
# targets of the dense LFM2-1.2B, 8B-A1B and 24B-A2B shapes (2.3, 2.6 and 4.6
# GB) with a released-size DSpark drafter each and decodes with the drafter
# scheduled and plain: 20 minutes on 2 shared cores once the checkpoints are
# written (they take minutes more the first time), hence the longer timeout;
# make bench-draft runs it alone.
BENCH      ?= .
BENCHCOUNT ?= 1
BENCHTIME  ?= 1s
bench:
	$(GO) test -p 1 -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 120m ./...

# bench-draft: the drafter's speed at real shapes alone (docs/drafting-speed.md).
.PHONY: bench-draft
bench-draft:
	$(GO) test -run '^$$' -bench 'DraftedDecode' -benchtime 1x -timeout 60m ./engine/sched

# fuzz: each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
FUZZ_TARGETS = \
	./format/safetensors:FuzzParseHeader \
	./format/bfp:FuzzDecodeTile \
	./format/bfp:FuzzEncodeRoundTrip \
	./format/dtype:FuzzToFloat32 \
	./format/dtype:FuzzFloat32ToBF16 \
	./format/lfmq1:FuzzParseManifest \
	./internal/strictjson:FuzzUnmarshal \
	./engine/chat:FuzzParse \
	./engine/chat:FuzzParseMessages \
	./engine/tokenizer:FuzzEncodeDecode \
	./engine/tokenizer:FuzzFromJSON \
	./engine/parser:FuzzParseToolCalls \
	./engine/parser:FuzzParser \
	./engine/parser:FuzzStopMatcher \
	./engine/api:FuzzChatRequest \
	./engine/api:FuzzCompletionRequest \
	./engine/model:FuzzUnmarshalSpan \
	./engine/draft:FuzzParseConfig \
	./quant/calib:FuzzReadRecords \
	./evidence:FuzzParse \
	./evidence/corpus:FuzzParse \
	./evidence/refcache:FuzzDecode \
	./evidence/refcache:FuzzReader \
	./evidence/score:FuzzDecodePromptLogprobs \
	./evidence/card:FuzzParseFrontMatter \
	./verify/sums:FuzzParse \
	./verify/sums:FuzzParseRuntimeRelease \
	./format/sshsig:FuzzParse \
	./format/sshsig:FuzzParseAllowedSigners \
	./release/archive:FuzzRead \
	./hub/download:FuzzContentRange \
	./hub/hubtest:FuzzReadCommit \
	./hub/hubapi:FuzzDecodeTree \
	./hub/publish:FuzzDecodeBatch \
	./hub/publish:FuzzGitAttributes \
	./engine/choice:FuzzParse \
	./evidence/task:FuzzReadJSONL \
	./evidence/task:FuzzParse \
	./bench:FuzzReadStream \
	./bench:FuzzParseMetrics

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) vet ./...

# sums: rewrite SHA256SUMS after a deliberate change to any testdata/ directory.
sums:
	find . -path ./.git -prune -o -type f -path '*/testdata/*' -print | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS

clean:
	rm -rf bin $(DEMO_OUT)

# bench-scaling: decode, prefill and one GPTQ run against thread counts on the
# synthetic 8B-shape checkpoint (6 layers), printed as one table; see
# scripts/bench-scaling.sh --help. BENCH_SCALING_ARGS passes options, e.g.
# make bench-scaling BENCH_SCALING_ARGS='--threads "1 2" --no-gptq'.
.PHONY: bench-scaling
bench-scaling:
	scripts/bench-scaling.sh $(BENCH_SCALING_ARGS)
