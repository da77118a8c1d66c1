package quant

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/format/lfmq1"
)

// goldenGPTQ is the sha256 of every tensor file of the tiny fixture's GPTQ
// checkpoint (fastSeqs calibration windows, default settings) and of its
// manifest's metrics block (the losses of every expert matrix), recorded
// from the solver as it was before its kernels were rewritten for speed
// (issue 12: "same bytes", at commit 722b37f). A kernel that changes the
// order of any floating-point operation feeding the quantized values or the
// recorded losses changes one of these. The rest of the manifest (version,
// settings) is left out so that unrelated changes do not touch this test.
var goldenGPTQ = map[string]string{
	"experts-02.safetensors": "aa9606669a94ddebd2b4b2be6d7fab4d60e47a2245ca9ee771c80460300c7aa8",
	"experts-03.safetensors": "e5f01041fbcd6ff2deb4bca50b6fc3e48dbe871efb7c41816b622bd8e133dacf",
	"experts-04.safetensors": "2bb798740c4c63fcb13754bc7d7dbde53b27fbd8ac4bd00fe5dbe9989228b732",
	"experts-05.safetensors": "6cbd856846b5468bc7fe39ce3331069c6693fb89d92116b1409a1f043f5183a0",
	"experts-06.safetensors": "c6660f42b35f37c28dabfff1b2fdcc070df699c1df8872e81465ace8df467c92",
	"experts-07.safetensors": "911beaaf3ea902d252e9a0dfd3aefc18f1584b44e41785fc68fe923f5a8a0aa9",
	"global.safetensors":     "9eb07a1c2494b13bb1854a1da61853019e46d78dc0a6c2b106330c062954adda",
	"layer-00.safetensors":   "9a4aa40f291f58b527f31fcd276761d2c66f6e34d2ad27fdc9fc1ba358444789",
	"layer-01.safetensors":   "adc8a1b07c73f17be0f5e4cd7063d52a0cd5ddb5648bad52e3382316efae632d",
	"layer-02.safetensors":   "0257dc13f343d24a1b09e95554d70955b943fdc4efe79866989361029fd95f98",
	"layer-03.safetensors":   "08e60ebd1bff24c86aae3375690255ad1be262db789bcdcb93c102a4fad85348",
	"layer-04.safetensors":   "11586b4e8e56f7347f0496784c6f29280cd73ca64b348808bd084a1a774bbcb2",
	"layer-05.safetensors":   "59f934c1e79a7bf584e8146155690f0c001048cfae682c5719ff44b53ee2d41e",
	"layer-06.safetensors":   "dad761424ba9d005d70ef32671c0d64c5976411ca6ee072d91e588263d8ab92e",
	"layer-07.safetensors":   "87538607e32bbbe9838648abfac56cb5e1272af29ff24999f3b3901667d2bbc1",
	"manifest metrics":       "dd8b4f92e3e7551489b5cc699d7e622a1930ae9cd5ad3cd6771644efbd476b19",
}

// TestGPTQGoldenBytes: the GPTQ checkpoint of the tiny fixture is byte for
// byte the one the reference solver produced, and so are its losses.
func TestGPTQGoldenBytes(t *testing.T) {
	dir, _ := tinyGPTQ(t, fastSeqs)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(b []byte) string {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	got := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = hash(b)
	}
	man, _, err := lfmq1.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	got["manifest metrics"] = hash(man.Metrics)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if got[n] != goldenGPTQ[n] {
			t.Errorf("%s: sha256 %s, want %s", n, got[n], goldenGPTQ[n])
		}
	}
	if len(got) != len(goldenGPTQ) {
		t.Errorf("%d hashed parts, want %d", len(got), len(goldenGPTQ))
	}
}
