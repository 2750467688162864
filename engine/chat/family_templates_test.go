package chat

import (
	"encoding/json"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/internal/shareddata"
)

// TestNewFamilyTemplates renders the chat templates published with models
// of the newer architectures (Phi-3.5-mini, MIT; Ministral 3, Apache-2.0;
// their text is in testdata/family_templates.json) over the shared
// conversations (system, user and assistant turns, with and without the
// generation prompt) and compares with Jinja2 3.1.6 set up as Hugging
// Face's apply_chat_template sets it up.
func TestNewFamilyTemplates(t *testing.T) {
	exp := sharedCases(t)
	raw, err := os.ReadFile("testdata/family_templates.json")
	require.NoError(t, err)
	var fams map[string]struct {
		Source string            `json:"source"`
		BOS    string            `json:"bos_token"`
		EOS    string            `json:"eos_token"`
		Cases  map[string]string `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &fams))
	require.Len(t, fams, 2)
	for name, f := range fams {
		t.Run(name, func(t *testing.T) {
			checkSharedCases(t, exp, f.Source, f.BOS, f.EOS, f.Cases)
		})
	}
}

// sharedCases reads the shared conversations (templates/expected.json).
func sharedCases(t *testing.T) expectedFile {
	t.Helper()
	raw, err := os.ReadFile(shareddata.Path(t, "templates/expected.json"))
	require.NoError(t, err)
	var exp expectedFile
	require.NoError(t, json.Unmarshal(raw, &exp))
	return exp
}

// checkSharedCases renders template src over the five shared
// conversations want names, through Apply (which must not fall back to a
// built-in format), and compares with want.
func checkSharedCases(t *testing.T, exp expectedFile, src, bos, eos string, want map[string]string) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	require.Len(t, names, 5)
	for _, cn := range names {
		c, ok := exp.Cases[cn]
		require.True(t, ok, "case %s", cn)
		msgs := make([]Message, len(c.Messages))
		for i, m := range c.Messages {
			msgs[i] = Message{Role: m.Role, Content: m.Content}
		}
		got, info, err := Apply(src, msgs, c.AddGenerationPrompt, bos, eos)
		require.NoError(t, err, "case %s", cn)
		require.False(t, info.Fallback(), "case %s fell back: %v", cn, info.Err)
		require.Equal(t, want[cn], got, "case %s", cn)
	}
}
