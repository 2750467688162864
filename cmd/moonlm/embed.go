package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/engine"
)

func init() {
	register(&command{
		name:    "embed",
		summary: "embedding vectors of texts, or reranker scores (-m FILE -p TEXT [-p TEXT...] [--pooling P] [--normalize])",
		run:     runEmbed,
	})
}

const embedUsage = `usage: moonlm embed -m FILE (-p TEXT ... | -f FILE) [--pooling P] [--normalize] [--json] [--rerank QUERY]
Embeds each text (with the model's special tokens: [CLS] text [SEP] for
BERT) and prints one vector per line, its values separated by spaces, in
the order of the texts; with pooling none, one line per token. --json
prints {"data": [{"index": I, "embedding": [...]}, ...]} instead (pooling
none: one entry per token, with "text" naming its text). --rerank QUERY
scores each text as a document against QUERY with a reranker (rank
pooling) and prints "SCORE<TAB>TEXT" lines.`

// stringsFlag collects a repeated option.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, "\n") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func runEmbed(args []string) error {
	fs := newFlagSet("embed")
	var ef engineFlags
	ef.register(fs, 0)
	var texts stringsFlag
	fs.Var(&texts, "p", "a `text` to embed (repeat for several)")
	fs.Var(&texts, "prompt", "")
	file := fs.String("f", "", "read the texts from `file`, one per line (\"-\" is stdin)")
	fs.StringVar(file, "file", "", "")
	pooling := fs.String("pooling", "model", "`pooling`: model (the file's, else mean), none, mean, cls, last or rank")
	normalize := fs.Bool("normalize", false, "scale each vector to unit length")
	asJSON := fs.Bool("json", false, "print JSON")
	query := fs.String("rerank", "", "score the texts as documents against this `query`")
	if help, err := parseFlags(fs, embedUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(embedUsage, "unexpected argument %q", fs.Arg(0))
	}
	if *file != "" {
		lines, err := readLines(*file)
		if err != nil {
			return err
		}
		texts = append(texts, lines...)
	}
	if len(texts) == 0 {
		return usageErr(embedUsage, "no texts: give -p TEXT or -f FILE")
	}
	p, err := engine.ParsePooling(*pooling)
	if err != nil {
		return usageErr(embedUsage, "%v", err)
	}
	m, err := ef.open()
	if err != nil {
		return err
	}
	defer m.Close()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if *query != "" {
		scores, err := m.Rerank(*query, texts)
		if err != nil {
			return err
		}
		for i, s := range scores {
			fmt.Fprintf(w, "%s\t%s\n", fmtFloat(s), texts[i])
		}
		return nil
	}
	vecs, err := m.Embed(texts, engine.EmbedParams{Pooling: p, Normalize: *normalize})
	if err != nil {
		return err
	}
	return writeEmbeddings(w, m, vecs, p, *asJSON)
}

// writeEmbeddings prints vecs, one vector (or, pooling none, one token's
// row) per line or as JSON.
func writeEmbeddings(w io.Writer, m *engine.Model, vecs [][]float32, p engine.Pooling, asJSON bool) error {
	dim, err := m.EmbedSize(p)
	if err != nil {
		return err
	}
	type entry struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Text      *int      `json:"text,omitempty"`
		Embedding []float32 `json:"embedding"`
	}
	var data []entry
	for i, v := range vecs {
		for r := 0; r+dim <= len(v); r += dim {
			row := v[r : r+dim]
			if asJSON {
				e := entry{Object: "embedding", Index: len(data), Embedding: row}
				if p == engine.PoolingNone {
					e.Text = &i
				}
				data = append(data, e)
				continue
			}
			for j, x := range row {
				if j > 0 {
					io.WriteString(w, " ")
				}
				io.WriteString(w, fmtFloat(x))
			}
			io.WriteString(w, "\n")
		}
	}
	if asJSON {
		enc := json.NewEncoder(w)
		return enc.Encode(map[string]any{"object": "list", "data": data})
	}
	return nil
}

func fmtFloat(x float32) string { return strconv.FormatFloat(float64(x), 'g', 8, 32) }

// readLines reads the non-empty lines of path ("-": stdin).
func readLines(path string) ([]string, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), "\r"); line != "" {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}
