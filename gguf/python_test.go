package gguf

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pyDump is one file as testdata/gguf_dump.py reports it.
type pyDump struct {
	Path       string   `json:"path"`
	Error      string   `json:"error"`
	Version    uint32   `json:"version"`
	Alignment  int64    `json:"alignment"`
	DataOffset int64    `json:"data_offset"`
	KV         []pyKV   `json:"kv"`
	Tensors    []pyTens `json:"tensors"`
}

type pyKV struct {
	Key    string  `json:"key"`
	Type   string  `json:"type"`
	Value  any     `json:"value"`
	UTF8   bool    `json:"utf8"`
	Count  int     `json:"count"`
	Elem   *string `json:"elem"`
	ElemID *uint32 `json:"elem_id"`
	SHA256 string  `json:"sha256"`
	RawHd  []any   `json:"head"`
}

type pyTens struct {
	Name   string  `json:"name"`
	Type   Type    `json:"type"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
	Bytes  int64   `json:"bytes"`
}

// pyTypeNames are gguf-py's GGUFValueType names, by our ValueType.
var pyTypeNames = [...]string{"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"}

// pythonDumper returns the python3 interpreter, or skips the test when it
// or the gguf package is missing.
func pythonDumper(t *testing.T) string {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found; install it and `pip install gguf==0.19.0` to run this cross-check")
	}
	if out, err := exec.Command(py, "-c", "import gguf, numpy").CombinedOutput(); err != nil {
		t.Skipf("python gguf package missing (pip install -r bindings/python/requirements-test.txt): %v: %s", err, out)
	}
	return py
}

// runPyDump dumps files with testdata/gguf_dump.py, in two processes
// (the Python reader is slow on big vocabularies), keyed by path.
func runPyDump(t *testing.T, py string, files []string) map[string]*pyDump {
	dumps := make(map[string]*pyDump)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := 0; w < 2; w++ {
		var part []string
		for i := w; i < len(files); i += 2 {
			part = append(part, files[i])
		}
		if len(part) == 0 {
			continue
		}
		wg.Add(1)
		go func(w int, part []string) {
			defer wg.Done()
			cmd := exec.Command(py, append([]string{filepath.Join("testdata", "gguf_dump.py")}, part...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				errs[w] = fmt.Errorf("gguf_dump.py: %v: %s", err, stderr.String())
				return
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				d := new(pyDump)
				dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
				dec.UseNumber()
				if err := dec.Decode(d); err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				dumps[d.Path] = d
				mu.Unlock()
			}
		}(w, part)
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return dumps
}

// TestAgainstPythonGGUF compares our reading of every .gguf file in the
// shared test data with the independent gguf Python package's.
func TestAgainstPythonGGUF(t *testing.T) {
	root := shareddata.Root()
	if root == "" {
		t.Skip("shared test data not found: set MOONLM_TESTDATA or place it at ../shared/testdata")
	}
	py := pythonDumper(t)
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".gguf") {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	dumps := runPyDump(t, py, files)
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		t.Run(rel, func(t *testing.T) {
			d := dumps[path]
			require.NotNil(t, d, "no dump")
			require.Empty(t, d.Error, "python could not read it")
			f, err := Open(path)
			require.NoError(t, err)
			defer f.Close()
			compareWithPython(t, f, d)
		})
	}
}

// TestWriterAgainstPython has the Python package read files our Writer
// made: every value type and every tensor type, versions 2 and 3, with the
// default and a larger alignment.
func TestWriterAgainstPython(t *testing.T) {
	py := pythonDumper(t)
	dir := t.TempDir()
	var files []string
	for _, version := range []uint32{2, 3} {
		for _, align := range []int{0, 64} {
			w := NewWriter()
			w.Version = version
			if align != 0 {
				require.NoError(t, w.SetAlignment(align))
			}
			for _, c := range roundTripValues {
				require.NoError(t, w.Set(c.key, c.v))
			}
			for i, typ := range Types() {
				shape := []int64{int64(typ.BlockSize() * (1 + i%2)), int64(1 + i%3)}
				rb, err := typ.RowBytes(shape[0])
				require.NoError(t, err)
				data := make([]byte, rb*shape[1])
				for j := range data {
					data[j] = byte(i + j)
				}
				require.NoError(t, w.AddTensor("t."+typ.String(), typ, shape, data))
			}
			p := filepath.Join(dir, fmt.Sprintf("w-v%d-a%d.gguf", version, align))
			var buf bytes.Buffer
			_, err := w.WriteTo(&buf)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
			files = append(files, p)
		}
	}
	dumps := runPyDump(t, py, files)
	for _, p := range files {
		d := dumps[p]
		require.NotNil(t, d, p)
		require.Empty(t, d.Error, "python could not read %s", p)
		f, err := Open(p)
		require.NoError(t, err)
		compareWithPython(t, f, d)
		f.Close()
	}
}

func compareWithPython(t *testing.T, f *File, d *pyDump) {
	assert.Equal(t, d.Version, f.Version)
	assert.Equal(t, d.Alignment, f.Alignment)
	if len(d.Tensors) > 0 {
		assert.Equal(t, d.DataOffset, f.DataOffset)
	}
	keys := make([]string, len(d.KV))
	for i, kv := range d.KV {
		keys[i] = kv.Key
	}
	require.Equal(t, keys, f.Keys())
	for _, kv := range d.KV {
		v, ok := f.Lookup(kv.Key)
		require.True(t, ok)
		require.Equal(t, kv.Type, pyTypeNames[v.Type()], kv.Key)
		if v.Type() != ValueArray {
			compareScalar(t, kv.Key, v, kv.Value, kv.UTF8)
			continue
		}
		a, err := v.Array()
		require.NoError(t, err, kv.Key)
		assert.Equal(t, kv.Count, a.Len(), kv.Key)
		if kv.Elem == nil {
			require.NotNil(t, kv.ElemID, kv.Key)
			assert.Equal(t, *kv.ElemID, uint32(a.ElemType()), kv.Key)
			continue
		}
		require.Equal(t, *kv.Elem, pyTypeNames[a.ElemType()], kv.Key)
		if a.ElemType() == ValueArray {
			continue
		}
		h := sha256.New()
		if a.ElemType() == ValueString {
			var n [8]byte
			for i := 0; i < a.Len(); i++ {
				b, err := a.StringBytes(i)
				require.NoError(t, err)
				binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
				h.Write(n[:])
				h.Write(b)
			}
		} else {
			h.Write(a.Raw())
		}
		assert.Equal(t, kv.SHA256, hex.EncodeToString(h.Sum(nil)), "%s: elements hash", kv.Key)
		for i, want := range kv.RawHd {
			e, err := a.Index(i)
			require.NoError(t, err)
			b, _ := e.StringBytes()
			compareScalar(t, fmt.Sprintf("%s[%d]", kv.Key, i), e, want, a.ElemType() != ValueString || isUTF8(b))
		}
	}

	require.Len(t, f.Tensors(), len(d.Tensors))
	for i, pt := range d.Tensors {
		tn := f.Tensors()[i]
		assert.Equal(t, pt.Name, tn.Name)
		assert.Equal(t, pt.Type, tn.Type, pt.Name)
		assert.Equal(t, pt.Shape, tn.Shape, pt.Name)
		assert.Equal(t, pt.Offset, tn.Offset, pt.Name)
		want := pt.Bytes
		if tn.Type == Q8_1 {
			// gguf-py sizes a q8_1 block as 40 bytes (two f32); ggml's
			// block_q8_1 is 36 (two f16), which is what files hold.
			want = want / 40 * 36
		}
		assert.Equal(t, want, int64(len(tn.Data)), pt.Name)
	}
}

func isUTF8(b []byte) bool { return strings.ToValidUTF8(string(b), "\uFFFD") == string(b) }

// compareScalar compares a decoded value with Python's JSON rendering of it.
func compareScalar(t *testing.T, what string, v Value, want any, validUTF8 bool) {
	switch v.Type() {
	case ValueString:
		s, err := v.String()
		if !validUTF8 {
			assert.Error(t, err, what)
			return
		}
		require.NoError(t, err, what)
		assert.Equal(t, want, s, what)
	case ValueBool:
		b, err := v.Bool()
		require.NoError(t, err, what)
		assert.Equal(t, want, b, what)
	case ValueFloat32, ValueFloat64:
		x, err := v.Float64()
		require.NoError(t, err, what)
		switch w := want.(type) {
		case string:
			assert.Equal(t, w, strings.ToLower(strconv.FormatFloat(x, 'g', -1, 64)), what) // "nan", "inf", "-inf"
		case json.Number:
			wf, err := strconv.ParseFloat(string(w), 64)
			require.NoError(t, err)
			assert.Equal(t, wf, x, what)
		default:
			t.Errorf("%s: python value %v (%T)", what, want, want)
		}
	default:
		w, ok := want.(json.Number)
		require.True(t, ok, "%s: python value %v (%T)", what, want, want)
		var got string
		if u, err := v.Uint64(); err == nil {
			got = strconv.FormatUint(u, 10)
		} else {
			i, err := v.Int64()
			require.NoError(t, err, what)
			got = strconv.FormatInt(i, 10)
		}
		assert.Equal(t, string(w), got, what)
	}
}
