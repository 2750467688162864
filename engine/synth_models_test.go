package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/internal/shareddata"
)

// The quantized synthetic models are not committed: each is written at test
// time by its committed, deterministic generator and checked against the
// sha256 below, that of the file its references (testdata/synth/*.ref.jsonl,
// *.embed.json) were made from. synthModel writes each file once into
// build/synth of the repository (or $MOONLM_SYNTH_DIR), where the tests of
// other packages and languages read it too (`make synth-models` writes them
// all, through TestWriteSynthModels, before those tests run).
//
// A generator that changes on purpose changes these sums:
// `go test ./engine -run TestWriteSynthModels -update-synth` writes every
// file without checking and logs its sha256, to be recorded here once the
// references are made again from the new files.

// synthModelFile is one generated synthetic model: its generator and the
// sha256 of the file its references were made from.
type synthModelFile struct {
	sha256 string
	build  func(t testing.TB) []byte
}

// synthModelFiles are the quantized synthetic models, by file name.
var synthModelFiles = map[string]synthModelFile{
	// Decoders of synthSpecs (synth_gen_test.go) and Qwen3.5 (synth_qwen35_test.go).
	"synth-smollm3-Q8_0.gguf":          {"af9d80d9d58498951746b8dd1aedc67b8a3897782ba6734c633683067091d669", synthDenseQ8("smollm3")},
	"synth-granite-Q8_0.gguf":          {"c9262568e73e77fd5f8da4fdc059caa0055b222c6414e9c0118148aa01188122", synthDenseQ8("granite")},
	"synth-phi3-Q8_0.gguf":             {"fcf0182d1ba0739254268e597f2a80c1c29bc29c16f02f3037a4502767ddfdbc", synthDenseQ8("phi3")},
	"synth-gemma2-Q8_0.gguf":           {"a1ff556dce7e9c23e8b66c7ea605ed04bc6823c94b91d090b8288040df9b7cf3", synthDenseQ8("gemma2")},
	"synth-olmo2-Q8_0.gguf":            {"92d7c01599200a0693e8748302c549a700849b51a5873b3cd3dad89a4b1cfeea", synthDenseQ8("olmo2")},
	"synth-mistral3-Q8_0.gguf":         {"b4090547c47d330a979493a3c59fb80ff6570ff36795f9c64303cfc4dcbad495", synthDenseQ8("mistral3")},
	"synth-exaone4-Q8_0.gguf":          {"0228610c8f5e9261b3c855f024d6375796e81bc2ea467789516e13abb492055e", synthDenseQ8("exaone4")},
	"synth-cohere2-Q8_0.gguf":          {"4d71bcb9e6569b81ef2f3cc2898d4ce7912741fcf1f5f0c46847dc6e7a403c82", synthDenseQ8("cohere2")},
	"synth-gemma4-Q8_0.gguf":           {"c79c939b0cf5f1dc2fbc89ededb1f9f5a719d8bdb61abc7122c658946b2c1947", synthDenseQ8("gemma4")},
	"synth-qwen35-Q8_0.gguf":           {"ff75b3713cc28c5ae9f04279e1b1b5c2181fa3ec68fd351b02f9153dd89ca615", func(t testing.TB) []byte { return buildSynth(t, synthQwen35, true) }},
	"synth-qwen35moe-Q8_0.gguf":        {"7283304f2acb596ad8b467ba76d073d97c835abbc19cbb6c4d41e4187bf4085e", func(t testing.TB) []byte { return buildSynth(t, synthQwen35MoE, true) }},
	"synth-qwen35moe-gateup-Q8_0.gguf": {"4ffd90955944e421697920b3c670394e0c8dac5364afde5bbc12f32692462079", synthQwen35MoEGateUpQ8},
	"synth-qwen3next-Q8_0.gguf":        {"d1ed5b305b8ea2cfffe337072f4122f0514967d6444de39b7659fb95f4ecd537", func(t testing.TB) []byte { return buildSynth(t, synthQwen3Next, true) }},
	// Mixtures of experts of synthMoESpecs (synth_moe_test.go).
	"synth-qwen3moe-Q8_0.gguf":  {"63755c2e6e1ed5ddecd407890e6450c44ac755f7e6edb2646ea3c37f6bddf8d2", synthMoEQ8("qwen3moe", false)},
	"synth-qwen3moe-MXFP4.gguf": {"32fccb92f50751f2d8994380231733b034aa67917e85d48d4832d6a77fb1efff", synthMoEQ8("qwen3moe", true)},
	"synth-olmoe-Q8_0.gguf":     {"a7766d39677a23a676bff459e53ddc159711c7a8c1c369a64cf64d36e47224ac", synthMoEQ8("olmoe", false)},
	"synth-qwen2moe-Q8_0.gguf":  {"be59924da33b511ae07366fe517f111c4a64c1e15af0b66c6eddcf7e6439cf6f", synthMoEQ8("qwen2moe", false)},
	"synth-mixtral-Q8_0.gguf":   {"539779b25eba71846d0989096230d5ceef0d414fd28adc5e042774b3b99a39f6", synthMoEQ8("mixtral", false)},
	"synth-gpt-oss-Q8_0.gguf":   {"c7a96d240fc30103b2a3c1e05072eda073eb07b70de3ec5be98e9d724b985841", synthMoEQ8("gpt-oss", false)},
	"synth-gpt-oss-MXFP4.gguf":  {"949e044f2c9dc38fdd5fd45eead83c1fe7317200ff9cbbf9d0adbcb4a6180996", synthMoEQ8("gpt-oss", true)},
	// Encoders. XLM-R's vocabulary comes from llama.cpp's test
	// vocabularies (`make llamacpp-vocab`); without them its file is
	// skipped.
	"synth-bert-Q8_0.gguf":               {"53d7b9f743c76dd687c41fa2afea5f5f478ffc653bd369ab4a623045c0d078b7", func(t testing.TB) []byte { return buildSynthBert(t, true) }},
	"synth-nomic-bert-Q8_0.gguf":         {"f53283a05479287baf7289341b175801aab7b3008fe06df0b786318475c211a1", func(t testing.TB) []byte { return buildSynthNomicBert(t, true) }},
	"synth-jina-bert-v2-Q8_0.gguf":       {"3519f4f5fc0458aa94a1e303d4fe71cd285a94872ccd586698f3078053c46822", func(t testing.TB) []byte { return buildSynthJinaBertV2(t, true) }},
	"synth-jina-bert-v2-older-Q8_0.gguf": {"966563bca9aa10bcfef4d48202d18914a84aef4e2483953fb2ed6c11bfb745d9", func(t testing.TB) []byte { return buildSynthJinaOlder(t, true) }},
	"synth-jina-reranker-Q8_0.gguf":      {"5cf2d686d270d4cc0b7b2451d8f9a22f3293030d03d46fd99ccde70b6b238eaa", func(t testing.TB) []byte { return buildSynthJinaReranker(t, true) }},
	"synth-xlmr-Q8_0.gguf":               {"34c8dc5c17e65e5ea26a3a7c0286cc4f183fcd7415df549eb84c57d2926d1cca", func(t testing.TB) []byte { return buildSynthXLMR(t, true) }},
}

// synthDenseQ8 is the generator of arch's Q8_0 file of synthSpecs.
func synthDenseQ8(arch string) func(t testing.TB) []byte {
	return func(t testing.TB) []byte { return buildSynth(t, synthSpecOf(t, arch), true) }
}

// synthMoEQ8 is the generator of the Q8_0 (or, with mxfp4, MXFP4-expert)
// file of the synthMoESpecs entry whose files are named synth-FILE-*.
func synthMoEQ8(file string, mxfp4 bool) func(t testing.TB) []byte {
	return func(t testing.TB) []byte {
		i := slices.IndexFunc(synthMoESpecs, func(s synthMoESpec) bool { return synthMoEName(s, true) == "synth-"+file+"-Q8_0" })
		require.GreaterOrEqual(t, i, 0, "no synthetic MoE spec named %s", file)
		return buildSynthMoEAs(t, synthMoESpecs[i], true, mxfp4)
	}
}

// synthModelDir is where the generated files go: $MOONLM_SYNTH_DIR (the
// Makefile sets it to build/synth) or build/synth of the repository, where
// the other packages' tests look for them too (shareddata.SynthModel).
func synthModelDir(t testing.TB) string {
	t.Helper()
	d := shareddata.SynthDir()
	require.NotEmpty(t, d, "no folder for the synthetic models: set MOONLM_SYNTH_DIR")
	return d
}

var (
	synthModelMu   sync.Mutex
	synthModelSeen = map[string]string{} // file name -> path, checked in this process
)

// synthModel returns the path of the generated synthetic model name (a key
// of synthModelFiles). The first call in a test process reuses the file
// already in synthModelDir if it has the recorded sha256, and otherwise
// generates it, checks its sha256 and writes it there (through a temporary
// file and a rename, so that other test processes never read part of one).
func synthModel(t testing.TB, name string) string {
	t.Helper()
	f, ok := synthModelFiles[name]
	require.True(t, ok, "%s is not a generated synthetic model (synthModelFiles)", name)
	synthModelMu.Lock()
	defer synthModelMu.Unlock()
	if p, ok := synthModelSeen[name]; ok {
		return p
	}
	path := filepath.Join(synthModelDir(t), name)
	if sum, err := fileSHA256(path); err == nil && sum == f.sha256 {
		synthModelSeen[name] = path
		return path
	}
	img := f.build(t)
	requireSynthSHA256(t, name, f.sha256, img)
	writeFileAtomic(t, path, img)
	synthModelSeen[name] = path
	return path
}

// requireSynthSHA256 requires img, the generator's file name, to be the file
// whose sha256 is want.
func requireSynthSHA256(t testing.TB, name, want string, img []byte) {
	t.Helper()
	require.Equal(t, want, sha256Hex(img),
		"the generator's %s differs from the file its references were made from "+
			"(if the change is intended: go test ./engine -run TestWriteSynthModels -update-synth, make the references again, record the new sha256 in synthModelFiles)", name)
}

// fileSHA256 is the hex sha256 of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// folder and a rename.
func writeFileAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	require.NoError(t, err)
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	require.NoError(t, err, "writing %s", path)
}

// TestWriteSynthModels runs every generator of synthModelFiles, checks its
// file against the recorded sha256 and writes it into synthModelDir (where
// it is not already), so that the tests of other packages and of the
// bindings find them (`make synth-models`). With -update-synth it writes
// every file without the check and logs the sha256s, for a generator
// changed on purpose.
func TestWriteSynthModels(t *testing.T) {
	names := make([]string, 0, len(synthModelFiles))
	for name := range synthModelFiles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(strings.TrimSuffix(name, ".gguf"), func(t *testing.T) {
			f := synthModelFiles[name]
			img := f.build(t)
			sum := sha256Hex(img)
			path := filepath.Join(synthModelDir(t), name)
			if *updateSynth {
				writeFileAtomic(t, path, img)
				if sum != f.sha256 {
					t.Logf("%s: new sha256 %s (recorded %s)", name, sum, f.sha256)
				} else {
					t.Logf("%s: sha256 %s, unchanged", name, sum)
				}
				return
			}
			requireSynthSHA256(t, name, f.sha256, img)
			if have, err := fileSHA256(path); err != nil || have != sum {
				writeFileAtomic(t, path, img)
			}
			synthModelMu.Lock()
			synthModelSeen[name] = path
			synthModelMu.Unlock()
		})
	}
}
