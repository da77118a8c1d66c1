# lfmq — build, test, demo, benchmarks, fuzzing and lint.
# The two set-up commands are `make demo` and `make test`.

GO       ?= go
BIN      ?= bin/lfmq
DEMO_OUT ?= demo-out
FUZZTIME ?= 30s
# The tests need no cgo; builds are pure Go.
export CGO_ENABLED = 0

.PHONY: all build test test-long demo bench fuzz lint sums clean

all: build

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/lfmq

test:
	$(GO) test -count=1 -timeout 15m ./...
	# The pure-Go kernel fallback must give the same bits as the assembly.
	$(GO) test -count=1 -tags purego ./engine/kernels

test-long:
	$(GO) test -count=1 -timeout 60m -tags long ./...

TINY     = testdata/tiny-lfm2-moe
DEMO_CHAT = '[{"role":"user","content":"What does the ls command do?"}]'

EVAL     = $(foreach c,chat instruct code book,--eval-corpus $(c)=$(TINY)/corpora/$(c).jsonl)

# demo: the pipeline as far as it exists, on the tiny model in testdata/:
# quantize with GPTQ (the product) and RTN (the baseline), inspect,
# generate from BF16 and lfmq-1.
demo: build
	rm -rf $(DEMO_OUT)/tiny-lfm2-moe-gptq $(DEMO_OUT)/tiny-lfm2-moe-rtn
	@echo "== quantize with GPTQ on the fixture's calibration set (about a minute on 2 cores)"
	$(BIN) quantize --model $(TINY)/model --out $(DEMO_OUT)/tiny-lfm2-moe-gptq \
		--calib $(TINY)/calibration/calibration.jsonl --calib-seqs 128 $(EVAL)
	@echo "== quantize with RTN"
	$(BIN) quantize --model $(TINY)/model --out $(DEMO_OUT)/tiny-lfm2-moe-rtn --method rtn
	$(BIN) inspect $(DEMO_OUT)/tiny-lfm2-moe-gptq
	@echo
	@echo "== generate, BF16 source"
	$(BIN) generate --model $(TINY)/model --chat $(DEMO_CHAT) --max-tokens 40 --stats
	@echo "== generate, lfmq-1 GPTQ"
	$(BIN) generate --model $(DEMO_OUT)/tiny-lfm2-moe-gptq --chat $(DEMO_CHAT) --max-tokens 40 --stats
	@echo
	@echo "lfmq-1 checkpoints written to $(DEMO_OUT)/tiny-lfm2-moe-gptq and $(DEMO_OUT)/tiny-lfm2-moe-rtn"

# bench: every benchmark once; see README for how to compare runs.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 60m ./...

# fuzz: each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
FUZZ_TARGETS = \
	./format/safetensors:FuzzParseHeader \
	./format/bfp:FuzzDecodeTile \
	./format/bfp:FuzzEncodeRoundTrip \
	./format/dtype:FuzzToFloat32 \
	./format/dtype:FuzzFloat32ToBF16 \
	./format/lfmq1:FuzzParseManifest \
	./engine/chat:FuzzParse \
	./engine/chat:FuzzParseMessages \
	./engine/tokenizer:FuzzEncodeDecode \
	./engine/tokenizer:FuzzFromJSON \
	./quant/calib:FuzzReadRecords

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
