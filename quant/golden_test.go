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

// tensorFileSums returns the sha256 of every .safetensors file of a
// checkpoint, by name. The manifest is left out: it records settings and
// identity that other changes may extend without touching a tensor byte.
func tensorFileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(data)
		sums[e.Name()] = hex.EncodeToString(s[:])
	}
	return sums
}

// The tensor files of the tiny fixture's RTN checkpoint and of its fast GPTQ
// checkpoint (fastSeqs windows, default settings), and the sha256 of that
// GPTQ manifest's metrics block (every expert matrix's losses), as the code
// wrote them at commit 722b37f: before the exponent rules existed (issue 16)
// and before the solver's kernels were rewritten for speed (issue 12). The
// exponent rule "max" must keep reproducing them byte for byte, and a kernel
// that reorders a floating-point operation feeding a quantized value or a
// recorded loss changes one of them. The rest of the manifest (version,
// settings, created_by) is left out: it records identity that other changes
// may extend without touching a tensor byte. A deliberate change of the
// bytes updates these sums and says why.
var (
	goldenDense = map[string]string{
		"global.safetensors":   "9eb07a1c2494b13bb1854a1da61853019e46d78dc0a6c2b106330c062954adda",
		"layer-00.safetensors": "9a4aa40f291f58b527f31fcd276761d2c66f6e34d2ad27fdc9fc1ba358444789",
		"layer-01.safetensors": "adc8a1b07c73f17be0f5e4cd7063d52a0cd5ddb5648bad52e3382316efae632d",
		"layer-02.safetensors": "0257dc13f343d24a1b09e95554d70955b943fdc4efe79866989361029fd95f98",
		"layer-03.safetensors": "08e60ebd1bff24c86aae3375690255ad1be262db789bcdcb93c102a4fad85348",
		"layer-04.safetensors": "11586b4e8e56f7347f0496784c6f29280cd73ca64b348808bd084a1a774bbcb2",
		"layer-05.safetensors": "59f934c1e79a7bf584e8146155690f0c001048cfae682c5719ff44b53ee2d41e",
		"layer-06.safetensors": "dad761424ba9d005d70ef32671c0d64c5976411ca6ee072d91e588263d8ab92e",
		"layer-07.safetensors": "87538607e32bbbe9838648abfac56cb5e1272af29ff24999f3b3901667d2bbc1",
	}
	goldenRTNExperts = map[string]string{
		"experts-02.safetensors": "0e7691c7766f259ab276d76c56bcfe4e61795fb93f10b650affcd3e85ada6369",
		"experts-03.safetensors": "07e724bc17862cb8b351293afc2f14c70c65c7873f2b084f429aa2cabc78127a",
		"experts-04.safetensors": "29d6c85a505eeef88380a50a04454a08e2f79bb442e67fb722f434ef80491fcf",
		"experts-05.safetensors": "099f3a31d9391ee7bd716d20165ae00cd880dbe549b4ca0f05de22935d64f37b",
		"experts-06.safetensors": "e6179cb9c73a25729e33b13252fa9fef081f7d454cd6558d6ed4d055b4a70997",
		"experts-07.safetensors": "f0dd939e9812af2dd4aafe4e4a66a7920951c1ba7e334b48a4cc16d133d2517c",
	}
	goldenGPTQExperts = map[string]string{
		"experts-02.safetensors": "aa9606669a94ddebd2b4b2be6d7fab4d60e47a2245ca9ee771c80460300c7aa8",
		"experts-03.safetensors": "e5f01041fbcd6ff2deb4bca50b6fc3e48dbe871efb7c41816b622bd8e133dacf",
		"experts-04.safetensors": "2bb798740c4c63fcb13754bc7d7dbde53b27fbd8ac4bd00fe5dbe9989228b732",
		"experts-05.safetensors": "6cbd856846b5468bc7fe39ce3331069c6693fb89d92116b1409a1f043f5183a0",
		"experts-06.safetensors": "c6660f42b35f37c28dabfff1b2fdcc070df699c1df8872e81465ace8df467c92",
		"experts-07.safetensors": "911beaaf3ea902d252e9a0dfd3aefc18f1584b44e41785fc68fe923f5a8a0aa9",
	}
	goldenGPTQMetrics = "dd8b4f92e3e7551489b5cc699d7e622a1930ae9cd5ad3cd6771644efbd476b19"

	// goldenDenseGPTQ is the fast GPTQ checkpoint with DenseMethod GPTQ
	// (the command line's default with GPTQ experts since issue 23), as
	// the code wrote it when that became the default: every file differs
	// from goldenDense/goldenGPTQExperts, the experts' too, since in
	// sequential mode they are calibrated on the solved BFP8 tensors.
	goldenDenseGPTQ = map[string]string{
		"experts-02.safetensors": "1fa31e093b37375e056d41c6039173ba6316113ed051bf1312fcd9e19f140234",
		"experts-03.safetensors": "2d74d8ff184977d06f2c5cb31de202144d6593f52c30a3e0cd6ae4a5bfd58640",
		"experts-04.safetensors": "4b908a1dd63c668e9f56edc311fa3edfe3fe0b8f97d78f3ea0fa9eb24499bf66",
		"experts-05.safetensors": "b6b02a18e923f4516d0391537639636690b5ec923d143354eb61e5b2da1334dc",
		"experts-06.safetensors": "6ec9c4452d547b2362d0a0398388b76570954bc91c89422be7e88032ec1fc865",
		"experts-07.safetensors": "5cfc52b0375d0b31af7d78524654e96dc4f0ef90db93a6daa672ef24aebbea25",
		"global.safetensors":     "15239cd0bb332f449792b02be556392018310e84e66f00d562dc347e4613adad",
		"layer-00.safetensors":   "e08d6d95aefa0e25a6f8aa2b4fa47fae6074d1a8e3ceea56c941c168416384b9",
		"layer-01.safetensors":   "f77a3e977e94a32392f1f884aada0ba9e9beaab1364c54c61a6e68ab38151724",
		"layer-02.safetensors":   "30bf59fa09481c2025e90c3f50af084c6d3ffd41ddb2f08c2fdd5e0e8539beb6",
		"layer-03.safetensors":   "01a16ae89e08a41e6d665d9ec20f8bb05256b0cb08227ea2cd5ebf133ed01fb7",
		"layer-04.safetensors":   "95eebc2046422aeca9cd5bdf136b6806836ee7a792602e7e5207e989e7e98f42",
		"layer-05.safetensors":   "63aca70e98562bd7776c809e0901ee5157075bbfd3fb055d0b38e055873358cc",
		"layer-06.safetensors":   "e69c2d633d7762010b6dec1d397e6ab61606f4511e54ac0cc8b3a58235263a07",
		"layer-07.safetensors":   "d5f819bb163b7721787e7c5ada73106db403ea2fe3c0b65d09885e303f70f1d0",
	}
	goldenDenseGPTQMetrics = "e1b9d345e21c975667077dbf3c4e4b4efbd185da30844cad59a664016b462acd"
)

// TestGoldenBytes: RTN and GPTQ with the default exponent rule (max) and
// the BFP8 tensors rounded to nearest (the library's default DenseMethod,
// --dense-method rtn) write the same tensor bytes as the reference code,
// and GPTQ the same losses; so does GPTQ with DenseMethod GPTQ, the
// command line's default, as recorded when it became the default.
func TestGoldenBytes(t *testing.T) {
	gptqDir, _ := tinyGPTQ(t, fastSeqs)
	man, _, err := lfmq1.ReadManifest(gptqDir)
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(man.Metrics); hex.EncodeToString(s[:]) != goldenGPTQMetrics {
		t.Errorf("gptq: manifest metrics have sha256 %x, want %s", s, goldenGPTQMetrics)
	}
	for _, c := range []struct {
		name    string
		dir     string
		experts map[string]string
	}{
		{"rtn", tinyRTN(t), goldenRTNExperts},
		{"gptq", gptqDir, goldenGPTQExperts},
	} {
		got := tensorFileSums(t, c.dir)
		want := map[string]string{}
		for n, s := range goldenDense {
			want[n] = s
		}
		for n, s := range c.experts {
			want[n] = s
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d tensor files, want %d", c.name, len(got), len(want))
		}
		var names []string
		for n := range want {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if got[n] != want[n] {
				t.Errorf("%s: %s has sha256 %s, want %s", c.name, n, got[n], want[n])
			}
		}
	}
	denseDir := tinyDenseGPTQ(t)
	got := tensorFileSums(t, denseDir)
	if len(got) != len(goldenDenseGPTQ) {
		t.Errorf("gptq with dense gptq: %d tensor files, want %d", len(got), len(goldenDenseGPTQ))
	}
	for n, want := range goldenDenseGPTQ {
		if got[n] != want {
			t.Errorf("gptq with dense gptq: %s has sha256 %s, want %s", n, got[n], want)
		}
	}
	man, _, err = lfmq1.ReadManifest(denseDir)
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(man.Metrics); hex.EncodeToString(s[:]) != goldenDenseGPTQMetrics {
		t.Errorf("gptq with dense gptq: manifest metrics have sha256 %x, want %s", s, goldenDenseGPTQMetrics)
	}
}
