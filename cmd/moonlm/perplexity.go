package main

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/moonlm/moonlm/engine"
)

func init() {
	register(&command{
		name:    "perplexity",
		summary: "perplexity of a text file as llama.cpp computes it (-m FILE -f TEXT [-c CTX])",
		run:     runPerplexity,
	})
}

const perplexityUsage = `usage: moonlm perplexity -m FILE -f TEXT [-c CTX] [--chunks N] [-t THREADS]
Splits the tokenized text into chunks of CTX tokens (each starting with BOS
when the model adds one) and scores the second half of every chunk, as
llama.cpp's perplexity tool does. Prints the running estimate per chunk and
the final PPL with its standard error.`

func runPerplexity(args []string) error {
	fs := newFlagSet("perplexity")
	var ef engineFlags
	ef.register(fs, 512)
	file := fs.String("f", "", "text `file` to score")
	fs.StringVar(file, "file", "", "")
	chunks := fs.Int("chunks", -1, "score at most `N` chunks (-1 = all)")
	if help, err := parseFlags(fs, perplexityUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(perplexityUsage, "unexpected argument %q", fs.Arg(0))
	}
	if *file == "" {
		return usageErr(perplexityUsage, "no text: give -f FILE")
	}
	nCtx := ef.ctx
	if nCtx < 4 {
		return fmt.Errorf("context %d is too small to score", nCtx)
	}
	text, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	m, err := ef.open()
	if err != nil {
		return err
	}
	defer m.Close()
	res, err := perplexity(m, string(text), *chunks, ef.sessionParams(nCtx), func(i int, ppl float64) {
		fmt.Printf("[%d]%.4f,", i, ppl)
	})
	fmt.Println()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "moonlm: %d chunks of %d tokens, %d scored, %.1f tokens/s\n",
		res.chunks, nCtx, res.count, float64(res.chunks*nCtx)/res.elapsed.Seconds())
	fmt.Printf("Final estimate: PPL = %.4f +/- %.5f\n", res.ppl, res.stderr)
	return nil
}

type pplResult struct {
	ppl, stderr float64
	chunks      int
	count       int
	elapsed     time.Duration
}

// perplexity follows llama.cpp: tokens = tokenize(text, with BOS if the
// model adds it); chunk i is tokens[i*n : (i+1)*n] with its first token
// replaced by BOS; the logits at positions n/2 .. n-2 predict the next
// token; the estimate is exp(mean NLL), its error from the NLL variance.
func perplexity(m *engine.Model, text string, maxChunks int, sp engine.SessionParams, progress func(int, float64)) (pplResult, error) {
	var r pplResult
	info := m.Info()
	n := sp.NCtx
	toks, err := m.Tokenize(text, true, false)
	if err != nil {
		return r, err
	}
	if len(toks) < 2*n {
		return r, fmt.Errorf("%w: the text has %d tokens; a context of %d needs at least %d", engine.ErrInvalidArgument, len(toks), n, 2*n)
	}
	nChunks := len(toks) / n
	if maxChunks >= 0 && maxChunks < nChunks {
		nChunks = maxChunks
	}
	s, err := m.NewSession(sp)
	if err != nil {
		return r, err
	}
	defer s.Close()
	first := n / 2
	vocab := info.VocabSize
	logits := make([]float32, (n-first)*vocab)
	chunk := make([]int32, n)
	var nll, nll2 float64
	t0 := time.Now()
	for i := 0; i < nChunks; i++ {
		copy(chunk, toks[i*n:(i+1)*n])
		if info.AddBOS && info.BOS >= 0 {
			chunk[0] = info.BOS
		}
		if err := s.Rewind(0); err != nil {
			return r, err
		}
		if err := s.PrefillFrom(chunk, first, logits); err != nil {
			return r, fmt.Errorf("chunk %d: %w", i, err)
		}
		for j := first; j < n-1; j++ {
			row := logits[(j-first)*vocab : (j-first+1)*vocab]
			lp := logProb(row, toks[i*n+j+1])
			nll -= lp
			nll2 += lp * lp
			r.count++
		}
		if progress != nil {
			progress(i+1, math.Exp(nll/float64(r.count)))
		}
	}
	r.chunks = nChunks
	r.elapsed = time.Since(t0)
	mean := nll / float64(r.count)
	r.ppl = math.Exp(mean)
	v := nll2/float64(r.count) - mean*mean
	if v > 0 && r.count > 1 {
		r.stderr = math.Sqrt(v/float64(r.count-1)) * r.ppl
	}
	return r, nil
}

// logProb is log softmax(row)[tok], computed in float64.
func logProb(row []float32, tok int32) float64 {
	mx := float64(row[0])
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(row[tok]) - mx - math.Log(sum)
}
