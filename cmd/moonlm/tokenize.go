package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/engine/tokenizer"
	"github.com/moonlm/moonlm/gguf"
)

func init() {
	register(&command{
		name:    "tokenize",
		summary: "print the token ids of a text (-m FILE [--no-bos] [--special] [--pieces] TEXT|-)",
		run:     runTokenize,
	})
}

const tokenizeUsage = `usage: moonlm tokenize -m FILE [--no-bos] [--special] [--pieces] TEXT
  -m FILE     GGUF model or vocabulary file
  --no-bos    do not add the BOS/EOS tokens the model asks for
  --special   parse control tokens written in the text (like <|im_end|>)
  --pieces    print one "id<TAB>piece" line per token instead of the ids
  TEXT        the text (several arguments are joined by spaces); "-" reads stdin`

func runTokenize(args []string) error {
	var (
		path                   string
		noBOS, special, pieces bool
		words                  []string
	)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" || a == "--model" || a == "-model":
			if i+1 >= len(args) {
				return usageErr(tokenizeUsage, "%s needs a file", a)
			}
			i++
			path = args[i]
		case strings.HasPrefix(a, "--model="), strings.HasPrefix(a, "-m="):
			path = a[strings.IndexByte(a, '=')+1:]
		case a == "--no-bos" || a == "-no-bos":
			noBOS = true
		case a == "--special" || a == "-special":
			special = true
		case a == "--pieces" || a == "-pieces":
			pieces = true
		case a == "-h" || a == "--help":
			fmt.Fprintln(os.Stdout, tokenizeUsage)
			return nil
		case a == "--":
			words = append(words, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			return usageErr(tokenizeUsage, "unknown option %s", a)
		default:
			words = append(words, a)
		}
	}
	if path == "" || len(words) == 0 {
		return usageErr(tokenizeUsage, "need -m FILE and the TEXT")
	}
	text := strings.Join(words, " ")
	if text == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		text = string(b)
	}

	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ids, err := tok.Encode(text, !noBOS, special)
	if err != nil {
		return fmt.Errorf("tokenizing: %w", err)
	}

	w := bufio.NewWriter(os.Stdout)
	if pieces {
		for _, id := range ids {
			fmt.Fprintf(w, "%d\t%s\n", id, strconv.Quote(string(tok.PieceSpecial(id))))
		}
	} else {
		for i, id := range ids {
			if i > 0 {
				w.WriteByte(' ')
			}
			w.WriteString(strconv.FormatInt(int64(id), 10))
		}
		w.WriteByte('\n')
	}
	return w.Flush()
}
