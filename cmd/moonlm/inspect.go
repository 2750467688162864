package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
)

func init() {
	register(&command{
		name:    "inspect",
		summary: "show a GGUF file's header, metadata and tensors (FILE [--json] [--packed])",
		run:     runInspect,
	})
}

// arrayHead is how many elements of an array the text output shows.
const arrayHead = 6

func runInspect(args []string) error {
	var path string
	asJSON, packed := false, false
	const usage = `usage: moonlm inspect FILE [--json] [--packed]
Prints a GGUF file's header, whether moonlm runs its architecture (and if not, the
supported family it is closest to), its metadata and tensor table.

options:
  --json    print one JSON object
  --packed  also list the weight matrices that opening the model repacks with this CPU's kernels`
	for _, a := range args {
		switch a {
		case "--json", "-json":
			asJSON = true
		case "--packed", "-packed":
			packed = true
		case "-h", "--help":
			fmt.Fprintln(os.Stdout, usage)
			return nil
		default:
			if strings.HasPrefix(a, "-") || path != "" {
				return fmt.Errorf("unexpected %q\n%s", a, usage)
			}
			path = a
		}
	}
	if path == "" {
		return errors.New(usage)
	}
	rep, err := inspectFile(path)
	if err != nil {
		return err
	}
	if packed {
		if err := rep.addPacked(path); err != nil {
			return err
		}
	}
	if asJSON {
		b, err := rep.json()
		if err != nil {
			return fmt.Errorf("inspect %s: %w", path, err)
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	return rep.writeText(os.Stdout)
}

// inspectReport is what inspect shows; its JSON form is the --json output.
type inspectReport struct {
	File        string           `json:"file"`
	Arch        archSupport      `json:"architecture"`
	Version     uint32           `json:"version"`
	Alignment   int64            `json:"alignment"`
	DataOffset  int64            `json:"data_offset"`
	Size        int64            `json:"size"`
	ParseTimeMS float64          `json:"parse_time_ms"`
	Metadata    orderedMeta      `json:"metadata"`
	Tensors     []tensorInfo     `json:"tensors"`
	NParams     int64            `json:"n_params"`
	TotalBytes  int64            `json:"tensor_bytes"`
	BytesByType map[string]int64 `json:"bytes_per_type"`
	// With --packed: the matrices opening the model repacks with this
	// CPU's kernel variant.
	PackedKernels string         `json:"packed_kernels,omitempty"`
	Packed        []packedTensor `json:"packed,omitempty"`
	PackedBytes   int64          `json:"packed_bytes,omitempty"`
}

// archSupport says whether the engine runs the file's architecture (from
// the engine/arch registry) and, when it does not, the supported family
// its block resembles ("none" when no family does).
type archSupport struct {
	Name      string   `json:"name"`
	Supported bool     `json:"supported"`
	Closest   string   `json:"closest_supported,omitempty"`
	Families  []string `json:"supported_families"`
}

func describeArch(f *gguf.File) archSupport {
	a := archSupport{Families: arch.Names()}
	if v, ok := f.Lookup("general.architecture"); ok {
		a.Name, _ = v.String()
	}
	_, a.Supported = arch.Lookup(a.Name)
	if !a.Supported {
		a.Closest = arch.Closest(a.Name)
		if a.Closest == "" {
			a.Closest = "none"
		}
	}
	return a
}

// text is the report's architecture line.
func (a archSupport) text() string {
	name := strconv.Quote(a.Name)
	if a.Name == "" {
		name = "(no general.architecture)"
	}
	if a.Supported {
		return name + " (supported)"
	}
	return fmt.Sprintf("%s (not supported; closest supported family: %s; supported: %s)",
		name, a.Closest, strings.Join(a.Families, ", "))
}

type packedTensor struct {
	Name   string `json:"name"`
	Layout string `json:"layout"`
	Bytes  int    `json:"bytes"`
}

// addPacked loads the model (without packing or touching the cache) to
// list the matrices that a normal open would repack.
func (r *inspectReport) addPacked(path string) error {
	p, err := withEnv(engine.ModelParams{Threads: 1, Pack: engine.PackOff,
		PackedCache: engine.PackedCacheParams{Mode: engine.CacheOff}})
	if err != nil {
		return fmt.Errorf("inspect --packed: %w", err)
	}
	m, err := engine.Open(path, p)
	if err != nil {
		return fmt.Errorf("inspect --packed: %w", err)
	}
	defer m.Close()
	r.PackedKernels = m.Kernels().Name()
	r.Packed = []packedTensor{}
	for _, t := range m.PackedTensors() {
		r.Packed = append(r.Packed, packedTensor{t.Name, t.Layout, t.Bytes})
		r.PackedBytes += int64(t.Bytes)
	}
	return nil
}

// json returns the report as indented JSON (without HTML escaping, so
// tokens such as "<s>" stay readable).
func (r *inspectReport) json() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode JSON: %w", err)
	}
	return b.Bytes(), nil
}

type tensorInfo struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
	Bytes  int64   `json:"bytes"`
}

type metaEntry struct {
	Key   string
	Type  string // value type, or "arr[ELEM]" for text output
	Value any    // JSON-ready scalar, or arrayInfo
	Text  string // text rendering
}

type arrayInfo struct {
	Type  string `json:"type"` // element type
	Count int    `json:"count"`
	Head  []any  `json:"head,omitempty"`
}

// orderedMeta marshals as a JSON object in file order.
type orderedMeta []metaEntry

func (m orderedMeta) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e.Key); err != nil {
			return nil, err
		}
		b.Truncate(b.Len() - 1) // Encode's newline
		b.WriteByte(':')
		if err := enc.Encode(e.Value); err != nil {
			return nil, fmt.Errorf("key %q: %w", e.Key, err)
		}
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func inspectFile(path string) (*inspectReport, error) {
	start := time.Now()
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	parse := time.Since(start)
	defer f.Close()

	rep := &inspectReport{
		File: path, Version: f.Version, Alignment: f.Alignment, DataOffset: f.DataOffset,
		Size: f.Size(), ParseTimeMS: float64(parse.Microseconds()) / 1000,
		Metadata: orderedMeta{}, Tensors: []tensorInfo{}, BytesByType: map[string]int64{},
		Arch: describeArch(f),
	}
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		e, err := describeValue(k, v)
		if err != nil {
			return nil, fmt.Errorf("inspect %s: key %q: %w", path, k, err)
		}
		rep.Metadata = append(rep.Metadata, e)
	}
	for _, t := range f.Tensors() {
		rep.Tensors = append(rep.Tensors, tensorInfo{t.Name, t.Type.String(), t.Shape, t.Offset, t.Size()})
		rep.NParams += t.NumElements()
		rep.TotalBytes += t.Size()
		rep.BytesByType[t.Type.String()] += t.Size()
	}
	return rep, nil
}

// describeValue renders one metadata value for JSON and text. Strings that
// are not valid UTF-8 are shown with replacement characters rather than
// failing the whole listing.
func describeValue(key string, v gguf.Value) (metaEntry, error) {
	e := metaEntry{Key: key, Type: v.Type().String()}
	if v.Type() != gguf.ValueArray {
		x, err := scalarJSON(v)
		if err != nil {
			return e, err
		}
		e.Value = x
		e.Text = scalarText(x)
		return e, nil
	}
	a, err := v.Array()
	if err != nil {
		return e, err
	}
	info := arrayInfo{Type: a.ElemType().String(), Count: a.Len()}
	parts := make([]string, 0, arrayHead+1)
	for i := 0; i < a.Len() && i < arrayHead; i++ {
		el, err := a.Index(i)
		if err != nil {
			return e, err
		}
		if el.Type() == gguf.ValueArray {
			sub, err := el.Array()
			if err != nil {
				return e, err
			}
			parts = append(parts, fmt.Sprintf("arr[%s,%d]", sub.ElemType(), sub.Len()))
			continue
		}
		x, err := scalarJSON(el)
		if err != nil {
			return e, err
		}
		info.Head = append(info.Head, x)
		parts = append(parts, scalarText(x))
	}
	if a.Len() > arrayHead {
		parts = append(parts, "...")
	}
	e.Type = fmt.Sprintf("arr[%s,%d]", a.ElemType(), a.Len())
	e.Value = info
	e.Text = "[" + strings.Join(parts, ", ") + "]"
	return e, nil
}

// scalarJSON decodes a scalar into a JSON-encodable value (non-finite
// floats as strings, which JSON cannot hold as numbers).
func scalarJSON(v gguf.Value) (any, error) {
	switch v.Type() {
	case gguf.ValueString:
		b, err := v.StringBytes()
		return strings.ToValidUTF8(string(b), "\uFFFD"), err
	case gguf.ValueFloat32, gguf.ValueFloat64:
		x, err := v.Float64()
		if err == nil && (math.IsNaN(x) || math.IsInf(x, 0)) {
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
		if v.Type() == gguf.ValueFloat32 {
			return float32(x), err // shortest text that reads back as this f32
		}
		return x, err
	case gguf.ValueBool:
		b, err := v.Bool()
		if err != nil {
			raw := v.Raw()
			if len(raw) == 1 {
				return fmt.Sprintf("invalid bool byte %d", raw[0]), nil
			}
		}
		return b, err
	}
	return v.Interface()
}

func scalarText(x any) string {
	if s, ok := x.(string); ok {
		const max = 120
		q := strconv.Quote(s)
		if len(q) > max {
			q = q[:max] + "...\" (" + strconv.Itoa(len(s)) + " bytes)"
		}
		return q
	}
	return fmt.Sprint(x)
}

func (r *inspectReport) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "file:        %s\n", r.File)
	fmt.Fprintf(&b, "arch:        %s\n", r.Arch.text())
	fmt.Fprintf(&b, "version:     %d\n", r.Version)
	fmt.Fprintf(&b, "size:        %d bytes\n", r.Size)
	fmt.Fprintf(&b, "alignment:   %d\n", r.Alignment)
	fmt.Fprintf(&b, "data offset: %d\n", r.DataOffset)
	fmt.Fprintf(&b, "parse time:  %.3f ms\n", r.ParseTimeMS)

	fmt.Fprintf(&b, "\nmetadata (%d keys):\n", len(r.Metadata))
	kw, tw := 0, 0
	for _, e := range r.Metadata {
		kw = max(kw, len(e.Key))
		tw = max(tw, len(e.Type))
	}
	for _, e := range r.Metadata {
		fmt.Fprintf(&b, "  %-*s  %-*s  %s\n", kw, e.Key, tw, e.Type, e.Text)
	}

	fmt.Fprintf(&b, "\ntensors (%d):\n", len(r.Tensors))
	nw := len("name")
	for _, t := range r.Tensors {
		nw = max(nw, len(t.Name))
	}
	if len(r.Tensors) > 0 {
		fmt.Fprintf(&b, "  %-*s  %-7s  %-22s  %12s  %12s\n", nw, "name", "type", "shape", "bytes", "offset")
	}
	for _, t := range r.Tensors {
		fmt.Fprintf(&b, "  %-*s  %-7s  %-22s  %12d  %12d\n", nw, t.Name, t.Type, shapeText(t.Shape), t.Bytes, t.Offset)
	}

	if r.Packed != nil {
		fmt.Fprintf(&b, "\npacked at open with the %s kernels (%d matrices, %d bytes):\n", r.PackedKernels, len(r.Packed), r.PackedBytes)
		for _, t := range r.Packed {
			fmt.Fprintf(&b, "  %-*s  %-14s  %12d\n", nw, t.Name, t.Layout, t.Bytes)
		}
	}

	fmt.Fprintf(&b, "\ntotals:\n  parameters:   %d\n  tensor bytes: %d\n", r.NParams, r.TotalBytes)
	types := make([]string, 0, len(r.BytesByType))
	for t := range r.BytesByType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(&b, "  %-12s  %d bytes\n", t+":", r.BytesByType[t])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func shapeText(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
