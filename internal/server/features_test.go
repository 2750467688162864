package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// personSchema is nested: an object with an enum, an array of objects and
// a $ref to a definition.
const personSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 20},
    "role": {"enum": ["admin", "user", "guest"]},
    "address": {"$ref": "#/$defs/address"},
    "pets": {"type": "array", "maxItems": 3, "items": {
      "type": "object",
      "properties": {"kind": {"enum": ["cat", "dog"]}, "age": {"type": "integer", "minimum": 0, "maximum": 30}},
      "required": ["kind", "age"]}}
  },
  "required": ["name", "role", "address", "pets"],
  "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}, "zip": {"type": "integer"}}, "required": ["city", "zip"]}}
}`

// checkPerson validates text against personSchema by hand.
func checkPerson(text string) error {
	var v map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, []string{"address", "name", "pets", "role"}) {
		return fmt.Errorf("keys %v", keys)
	}
	var name, role string
	if json.Unmarshal(v["name"], &name) != nil || len([]rune(name)) > 20 {
		return fmt.Errorf("name %s", v["name"])
	}
	if json.Unmarshal(v["role"], &role) != nil || !slices.Contains([]string{"admin", "user", "guest"}, role) {
		return fmt.Errorf("role %s", v["role"])
	}
	var addr map[string]json.RawMessage
	if json.Unmarshal(v["address"], &addr) != nil || len(addr) != 2 {
		return fmt.Errorf("address %s", v["address"])
	}
	var city string
	var zip int64
	if json.Unmarshal(addr["city"], &city) != nil || json.Unmarshal(addr["zip"], &zip) != nil {
		return fmt.Errorf("address %s", v["address"])
	}
	var pets []map[string]json.RawMessage
	if json.Unmarshal(v["pets"], &pets) != nil || len(pets) > 3 {
		return fmt.Errorf("pets %s", v["pets"])
	}
	for _, p := range pets {
		var kind string
		var age int
		if len(p) != 2 || json.Unmarshal(p["kind"], &kind) != nil || (kind != "cat" && kind != "dog") ||
			json.Unmarshal(p["age"], &age) != nil || age < 0 || age > 30 {
			return fmt.Errorf("pet %v", p)
		}
	}
	return nil
}

// chatContent posts a chat request, streamed or not, and returns each
// choice's content and finish reason.
func chatContent(t *testing.T, url, body string, stream bool) ([]string, []string) {
	t.Helper()
	if stream {
		body = strings.TrimSuffix(body, "}") + `,"stream":true}`
	}
	resp, b := post(t, url, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if stream {
		st := readStream(t, strings.NewReader(string(b)), true)
		if !st.done || st.errBody != "" {
			t.Fatalf("stream: done %v, error %s", st.done, st.errBody)
		}
		var texts, reasons []string
		for i := 0; i < len(st.finish); i++ {
			texts, reasons = append(texts, st.texts[i]), append(reasons, st.finish[i])
		}
		return texts, reasons
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	var texts, reasons []string
	for _, c := range r.Choices {
		s := ""
		if c.Message.Content != nil {
			s = *c.Message.Content
		}
		texts, reasons = append(texts, s), append(reasons, c.FinishReason)
	}
	return texts, reasons
}

// At temperature 1 the output follows the schema, streamed and not.
func TestResponseFormatJSONSchema(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 1024, Parallel: 2})
	url := ts.URL + "/v1/chat/completions"
	rf := `,"response_format":{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + personSchema + `}}`
	for _, stream := range []bool{false, true} {
		for seed := 1; seed <= 2; seed++ {
			body := chatBody("Describe a person as JSON.", fmt.Sprintf(`,"temperature":1.0,"seed":%d,"n":2,"max_tokens":400%s`, seed, rf))
			texts, reasons := chatContent(t, url, body, stream)
			if len(texts) != 2 {
				t.Fatalf("stream %v: %d choices", stream, len(texts))
			}
			for i, text := range texts {
				if reasons[i] != "stop" {
					t.Errorf("stream %v seed %d choice %d: finish %q (text %q)", stream, seed, i, reasons[i], text)
					continue
				}
				if err := checkPerson(text); err != nil {
					t.Errorf("stream %v seed %d choice %d: %v in %q", stream, seed, i, err, text)
				}
			}
		}
	}
	// json_object: any JSON object.
	for _, stream := range []bool{false, true} {
		body := chatBody("Say hi in JSON.", `,"temperature":1.0,"seed":7,"max_tokens":200,"response_format":{"type":"json_object"}`)
		texts, reasons := chatContent(t, url, body, stream)
		var obj map[string]any
		if reasons[0] != "stop" || json.Unmarshal([]byte(texts[0]), &obj) != nil {
			t.Errorf("json_object stream %v: finish %q, text %q", stream, reasons[0], texts[0])
		}
	}
}

// directLogprobs runs prompt greedily for n tokens on its own session and
// returns, per step, the chosen token, its log_softmax and the top k.
func directLogprobs(t *testing.T, m *engine.Model, prompt []int32, n, k int) ([]int32, []float64, [][]float64) {
	t.Helper()
	s, err := m.NewSession(engine.SessionParams{NCtx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	if err := s.Prefill(prompt, logits); err != nil {
		t.Fatal(err)
	}
	var toks []int32
	var lps []float64
	var tops [][]float64
	for range n {
		mx := math.Inf(-1)
		best := 0
		for i, l := range logits {
			if float64(l) > mx {
				mx, best = float64(l), i
			}
		}
		sum := 0.0
		for _, l := range logits {
			sum += math.Exp(float64(l) - mx)
		}
		lse := mx + math.Log(sum)
		all := make([]float64, len(logits))
		for i, l := range logits {
			all[i] = float64(l) - lse
		}
		sort.Sort(sort.Reverse(sort.Float64Slice(all)))
		toks, lps, tops = append(toks, int32(best)), append(lps, float64(logits[best])-lse), append(tops, all[:k])
		if err := s.Decode(int32(best), logits); err != nil {
			t.Fatal(err)
		}
	}
	return toks, lps, tops
}

// A greedy request's log-probabilities equal log_softmax of the logits,
// in chat (streamed and not) and completions (streamed and not).
func TestLogprobsGreedy(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 512})
	prompt, err := m.Tokenize("The capital of France is", true, true)
	if err != nil {
		t.Fatal(err)
	}
	const n, k = 6, 5
	toks, lps, tops := directLogprobs(t, m, prompt, n, k)
	ids, _ := json.Marshal(prompt)
	type entry struct {
		Token       string  `json:"token"`
		Logprob     float64 `json:"logprob"`
		Bytes       []int   `json:"bytes"`
		TopLogprobs []struct {
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	}
	check := func(what string, got []entry) {
		t.Helper()
		if len(got) != n {
			t.Fatalf("%s: %d entries, want %d", what, len(got), n)
		}
		for i, e := range got {
			piece := string(m.TokenPiece(toks[i]))
			if e.Token != piece || len(e.Bytes) != len(piece) {
				t.Errorf("%s %d: token %q bytes %v, want %q", what, i, e.Token, e.Bytes, piece)
			}
			if math.Abs(e.Logprob-lps[i]) > 1e-3 {
				t.Errorf("%s %d: logprob %g, want %g", what, i, e.Logprob, lps[i])
			}
			if len(e.TopLogprobs) != k {
				t.Errorf("%s %d: %d top logprobs, want %d", what, i, len(e.TopLogprobs), k)
				continue
			}
			for j, tl := range e.TopLogprobs {
				if math.Abs(tl.Logprob-tops[i][j]) > 1e-3 {
					t.Errorf("%s %d top %d: %g, want %g", what, i, j, tl.Logprob, tops[i][j])
				}
			}
		}
	}
	// Completions: the legacy shape, whole and streamed.
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"prompt":%s,"temperature":0,"max_tokens":%d,"logprobs":%d,"stream":%v}`, ids, n, k, stream)
		resp, b := post(t, ts.URL+"/v1/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("completions: %d %s", resp.StatusCode, b)
		}
		var chunks []string
		if stream {
			for _, line := range strings.Split(string(b), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
					chunks = append(chunks, d)
				}
			}
		} else {
			chunks = []string{string(b)}
		}
		var got []entry
		var offsets []int
		for _, c := range chunks {
			var r struct {
				Choices []struct {
					Logprobs *struct {
						Tokens        []string             `json:"tokens"`
						TokenLogprobs []float64            `json:"token_logprobs"`
						TopLogprobs   []map[string]float64 `json:"top_logprobs"`
						TextOffset    []int                `json:"text_offset"`
					} `json:"logprobs"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(c), &r); err != nil {
				t.Fatal(err)
			}
			for _, ch := range r.Choices {
				if ch.Logprobs == nil {
					continue
				}
				for i, tok := range ch.Logprobs.Tokens {
					e := entry{Token: tok, Logprob: ch.Logprobs.TokenLogprobs[i], Bytes: make([]int, len(tok))}
					var vals []float64
					for _, v := range ch.Logprobs.TopLogprobs[i] {
						vals = append(vals, v)
					}
					sort.Sort(sort.Reverse(sort.Float64Slice(vals)))
					for _, v := range vals {
						e.TopLogprobs = append(e.TopLogprobs, struct {
							Token   string  `json:"token"`
							Logprob float64 `json:"logprob"`
						}{Logprob: v})
					}
					got = append(got, e)
					offsets = append(offsets, ch.Logprobs.TextOffset[i])
				}
			}
		}
		// Distinct tokens of the same text share a key of the legacy
		// map, which then has fewer than k: pad with the expected values
		// (the values present are still compared, best first).
		for i := range got {
			if i < n && len(got[i].TopLogprobs) < k && len(got[i].TopLogprobs) > 0 {
				for len(got[i].TopLogprobs) < k {
					got[i].TopLogprobs = append(got[i].TopLogprobs, got[i].TopLogprobs[0])
					got[i].TopLogprobs[len(got[i].TopLogprobs)-1].Logprob = tops[i][len(got[i].TopLogprobs)-1]
				}
			}
		}
		check(fmt.Sprintf("completions stream=%v", stream), got)
		off := 0
		for i, o := range offsets {
			if o != off {
				t.Errorf("completions stream=%v: text_offset[%d] %d, want %d", stream, i, o, off)
			}
			off += len(got[i].Token)
		}
	}
	// Chat: the prompt is the template's, so compare with its tokens.
	chatToks, err := chatPromptTokens(m, "The capital of France is")
	if err != nil {
		t.Fatal(err)
	}
	toks, lps, tops = directLogprobs(t, m, chatToks, n, k)
	for _, stream := range []bool{false, true} {
		body := chatBody("The capital of France is", fmt.Sprintf(`,"temperature":0,"max_tokens":%d,"logprobs":true,"top_logprobs":%d,"stream":%v`, n, k, stream))
		resp, b := post(t, ts.URL+"/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("chat: %d %s", resp.StatusCode, b)
		}
		var got []entry
		var chunks []string
		if stream {
			for _, line := range strings.Split(string(b), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
					chunks = append(chunks, d)
				}
			}
		} else {
			chunks = []string{string(b)}
		}
		for _, c := range chunks {
			var r struct {
				Choices []struct {
					Logprobs *struct {
						Content []entry `json:"content"`
					} `json:"logprobs"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(c), &r); err != nil {
				t.Fatal(err)
			}
			for _, ch := range r.Choices {
				if ch.Logprobs != nil {
					got = append(got, ch.Logprobs.Content...)
				}
			}
		}
		check(fmt.Sprintf("chat stream=%v", stream), got)
	}
}

// chatPromptTokens is the prompt the server makes of one user message.
func chatPromptTokens(m *engine.Model, user string) ([]int32, error) {
	text, err := m.ApplyChatTemplateNamed("", []chat.Message{{Role: "user", Content: user}}, true)
	if err != nil {
		return nil, err
	}
	toks, err := m.Tokenize(text, false, true)
	if err != nil {
		return nil, err
	}
	if info := m.Info(); info.AddBOS && info.BOS >= 0 && (len(toks) == 0 || toks[0] != info.BOS) {
		toks = append([]int32{info.BOS}, toks...)
	}
	return toks, nil
}

const weatherTool = `[{"type":"function","function":{"name":"get_weather","description":"Get the weather in a city",
 "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"]}}},
 {"type":"function","function":{"name":"get_time","description":"Get the time in a city",
 "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":30}},"required":["city"]}}}]`

type gotCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCallsOf posts a chat request and returns the first choice's tool
// calls, content and finish reason, from the whole answer or the stream.
func toolCallsOf(t *testing.T, url, body string, stream bool) ([]gotCall, string, string) {
	t.Helper()
	if stream {
		body = strings.TrimSuffix(body, "}") + `,"stream":true}`
	}
	resp, b := post(t, url, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		var r struct {
			Choices []struct {
				Message struct {
					Content   *string   `json:"content"`
					ToolCalls []gotCall `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("answer %s: %v", b, err)
		}
		c := r.Choices[0]
		content := ""
		if c.Message.Content != nil {
			content = *c.Message.Content
		}
		return c.Message.ToolCalls, content, c.FinishReason
	}
	var calls []gotCall
	content, finish := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index int `json:"index"`
						gotCall
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %s: %v", d, err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content += *ch.Delta.Content
			}
			// OpenAI's delta protocol: a call's first delta has its id,
			// type and name; later ones append to its arguments.
			for _, tc := range ch.Delta.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, gotCall{})
				}
				cl := &calls[tc.Index]
				if tc.ID != "" {
					cl.ID, cl.Type = tc.ID, tc.Type
				}
				cl.Function.Name += tc.Function.Name
				cl.Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return calls, content, finish
}

// checkWeatherArgs validates a call's arguments against its tool's schema.
func checkCallArgs(c gotCall) error {
	var args map[string]any
	if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
		return fmt.Errorf("arguments %q: %v", c.Function.Arguments, err)
	}
	city, ok := args["city"].(string)
	if !ok || len([]rune(city)) > 30 {
		return fmt.Errorf("city in %q", c.Function.Arguments)
	}
	switch c.Function.Name {
	case "get_weather":
		if u := args["unit"]; u != "celsius" && u != "fahrenheit" || len(args) != 2 {
			return fmt.Errorf("arguments %q", c.Function.Arguments)
		}
	case "get_time":
		if len(args) != 1 {
			return fmt.Errorf("arguments %q", c.Function.Arguments)
		}
	default:
		return fmt.Errorf("function %q", c.Function.Name)
	}
	if c.ID == "" || c.Type != "function" {
		return fmt.Errorf("id %q type %q", c.ID, c.Type)
	}
	return nil
}

// tool_choice "required" and a named function force a valid call at
// temperature 1, streamed and not; the call and its result go back in.
func TestToolCalls(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 2048})
	url := ts.URL + "/v1/chat/completions"
	for _, stream := range []bool{false, true} {
		for seed := 1; seed <= 2; seed++ {
			for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"get_time"}}`} {
				body := chatBody("What is the weather in Paris?", fmt.Sprintf(`,"temperature":1.0,"seed":%d,"max_tokens":200,"tools":%s,"tool_choice":%s`, seed, weatherTool, choice))
				calls, _, finish := toolCallsOf(t, url, body, stream)
				what := fmt.Sprintf("stream %v seed %d choice %s", stream, seed, choice)
				if finish != "tool_calls" || len(calls) != 1 {
					t.Errorf("%s: finish %q, %d calls", what, finish, len(calls))
					continue
				}
				if err := checkCallArgs(calls[0]); err != nil {
					t.Errorf("%s: %v", what, err)
				}
				if strings.HasPrefix(choice, "{") && calls[0].Function.Name != "get_time" {
					t.Errorf("%s: called %q", what, calls[0].Function.Name)
				}
			}
		}
	}
	// The round trip: the assistant's call and the tool's result.
	body := chatBody("What is the weather in Paris?", `,"temperature":0,"max_tokens":200,"tools":`+weatherTool+`,"tool_choice":"required"`)
	calls, _, _ := toolCallsOf(t, url, body, false)
	if len(calls) != 1 {
		t.Fatalf("%d calls", len(calls))
	}
	callJSON, _ := json.Marshal(calls)
	msgs := fmt.Sprintf(`[{"role":"user","content":"What is the weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":%s},
		{"role":"tool","tool_call_id":%q,"content":"{\"temperature\": 21}"}]`, callJSON, calls[0].ID)
	for _, choice := range []string{`"auto"`, `"none"`} {
		resp, b := post(t, url, `{"messages":`+msgs+`,"max_tokens":30,"temperature":0,"tools":`+weatherTool+`,"tool_choice":`+choice+`}`)
		if resp.StatusCode != 200 {
			t.Fatalf("tool result, tool_choice %s: %d %s", choice, resp.StatusCode, b)
		}
		var r struct {
			Choices []struct {
				Message struct {
					Content   *string   `json:"content"`
					ToolCalls []gotCall `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("answer %s: %v", b, err)
		}
		c := r.Choices[0]
		if choice == `"none"` && (len(c.Message.ToolCalls) > 0 || c.FinishReason == "tool_calls" || c.Message.Content == nil) {
			t.Errorf("tool_choice none: %s", b)
		}
		if c.FinishReason == "tool_calls" {
			for _, cl := range c.Message.ToolCalls {
				if cl.ID == "" || cl.Function.Name == "" {
					t.Errorf("auto: a malformed call %s", b)
				}
			}
		}
	}
}

// With parallel_tool_calls true a forced reply may make several calls,
// each valid; without it, one.
func TestToolCallsParallel(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 2048})
	url := ts.URL + "/v1/chat/completions"
	multi := 0
	for _, stream := range []bool{false, true} {
		body := chatBody("What is the weather in Paris?", `,"temperature":1.0,"seed":1,"max_tokens":300,"parallel_tool_calls":true,"tools":`+weatherTool+`,"tool_choice":"required"`)
		calls, _, finish := toolCallsOf(t, url, body, stream)
		if finish != "tool_calls" || len(calls) == 0 {
			t.Fatalf("stream %v: finish %q, %d calls", stream, finish, len(calls))
		}
		if len(calls) > 1 {
			multi++
		}
		for i, c := range calls {
			if err := checkCallArgs(c); err != nil {
				t.Errorf("stream %v call %d: %v", stream, i, err)
			}
		}
	}
	if multi == 0 {
		t.Error("no reply made several calls")
	}
}

// Gemma 3 with the built-in gemma format (told to use the Hermes form)
// takes a forced call too.
func TestToolCallsGemma(t *testing.T) {
	m, err := engine.Open(shareddata.Model(t, "gemma-3-270m-q4_k_m.gguf"), engine.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() }) // after the server's cleanup
	_, ts := start(t, m, Config{Ctx: 2048, ChatTemplate: "gemma"})
	for _, stream := range []bool{false, true} {
		body := chatBody("What is the weather in Paris?", `,"temperature":1.0,"seed":2,"max_tokens":200,"tools":`+weatherTool+`,"tool_choice":"required"`)
		calls, _, finish := toolCallsOf(t, ts.URL+"/v1/chat/completions", body, stream)
		if finish != "tool_calls" || len(calls) != 1 {
			t.Fatalf("stream %v: finish %q, %d calls", stream, finish, len(calls))
		}
		if err := checkCallArgs(calls[0]); err != nil {
			t.Errorf("stream %v: %v", stream, err)
		}
	}
}

// The prompt carries the tools: the template (or the Hermes fallback)
// describes them to the model.
func TestToolsInPrompt(t *testing.T) {
	m := smol(t)
	s, ts := start(t, m, Config{Ctx: 2048})
	_ = ts
	text, err := s.renderChatTools([]chat.Message{{Role: "user", Content: "hi"}}, chat.JSON(weatherTool))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "get_weather") || !strings.Contains(text, "get_time") {
		t.Errorf("the prompt does not name the tools: %q", text)
	}
}

// The llama-server sampler extras are accepted, and a seeded request with
// them repeats itself.
func TestSamplerExtras(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 512})
	url := ts.URL + "/v1/chat/completions"
	for _, extra := range []string{
		`,"typical_p":0.9`,
		`,"mirostat":2,"mirostat_tau":4,"mirostat_eta":0.2`,
		`,"mirostat":1`,
		`,"dry_multiplier":0.8,"dry_base":1.75,"dry_allowed_length":2,"dry_penalty_last_n":-1,"dry_sequence_breakers":["\n"]`,
		`,"xtc_probability":0.5,"xtc_threshold":0.1`,
	} {
		body := chatBody("Tell me a story.", `,"temperature":1,"seed":3,"max_tokens":12`+extra)
		a, _ := chatContent(t, url, body, false)
		b, _ := chatContent(t, url, body, false)
		if a[0] == "" || a[0] != b[0] {
			t.Errorf("%s: %q then %q", extra, a[0], b[0])
		}
	}
}

// recorder is a responder that records what it is given.
type recorder struct {
	texts    []string
	calls    []toolCallOut
	thoughts []string
}

func (r *recorder) text(_ int, t string, _ []tokenLogprob) error {
	r.texts = append(r.texts, t)
	return nil
}
func (r *recorder) toolCalls(_ int, c []toolCallOut) error {
	r.calls = append(r.calls, c...)
	return nil
}
func (r *recorder) reasoning(_ int, t string) error {
	r.thoughts = append(r.thoughts, t)
	return nil
}
func (r *recorder) finish(int, string) error { return nil }
func (r *recorder) done(usage)               {}
func (r *recorder) fail(*apiError)           {}

// Streaming with tools in the Hermes form sends the text before the first
// call as it comes, holds a possible tag start, and never sends a call's
// text as content.
func TestHeldTextHermes(t *testing.T) {
	s := &Server{cfg: Config{Log: func(string, ...any) {}}}
	cases := []struct {
		pieces  []string
		content string
		calls   int
		before  int // pieces of content sent before the end
	}{
		{[]string{"Sure, ", "let me <to", "ol_call>\n", `{"name": "f", "arguments": {"a": 1}}`, "\n</tool_call>"}, "Sure, let me ", 1, 2},
		{[]string{"<tool_call>", `{"name": "f", "arguments": {}}`, "</tool_call>"}, "", 1, 0},
		{[]string{"a <", "b and <tool_call> is a tag", "."}, "a <b and <tool_call> is a tag.", 0, 2},
		{[]string{"see <tool_call> then ", "<tool_call>", `{"name": "f", "arguments": {}}`}, "see <tool_call> then ", 1, 1},
	}
	for i, c := range cases {
		var r recorder
		var h heldText
		for _, p := range c.pieces {
			if err := h.add(&r, 0, p, nil, true); err != nil {
				t.Fatal(err)
			}
		}
		if len(r.texts) != c.before {
			t.Errorf("case %d: %d pieces sent before the end (%q), want %d", i, len(r.texts), r.texts, c.before)
		}
		reason, err := s.releaseHeld(&r, 0, &h, chat.ToolFormatHermes, false, true, "stop")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(r.texts, ""); got != c.content || len(r.calls) != c.calls {
			t.Errorf("case %d: content %q and %d calls, want %q and %d", i, got, len(r.calls), c.content, c.calls)
		}
		if want := map[bool]string{true: "tool_calls", false: "stop"}[c.calls > 0]; reason != want {
			t.Errorf("case %d: reason %q", i, reason)
		}
	}
}

// A reply's reasoning goes out as reasoning_content and the answer as the
// content: harmony's analysis and final channels, a <think> block; with
// tools, the calls after the reasoning are read too.
func TestHeldTextReasoning(t *testing.T) {
	s := &Server{cfg: Config{Log: func(string, ...any) {}}}
	cases := []struct {
		f               chat.ToolFormat
		tools           bool
		text            string
		thought, answer string
		calls           int
	}{
		{chat.ToolFormatHarmony, false, "<|channel|>analysis<|message|>User greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello!", "User greets.", "Hello!", 0},
		{chat.ToolFormatHarmony, false, "<|channel|>final<|message|>Hi", "", "Hi", 0},
		{chat.ToolFormatHermes, false, "<think>\nEasy.\n</think>\n\n5", "Easy.", "5", 0},
		{chat.ToolFormatHermes, false, "no thoughts", "", "no thoughts", 0},
		{chat.ToolFormatHarmony, true, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}", "Need weather.", "", 1},
	}
	for i, c := range cases {
		var r recorder
		var h heldText
		if err := h.add(&r, 0, c.text, nil, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.releaseHeld(&r, 0, &h, c.f, false, c.tools, "stop"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(r.thoughts, ""); got != c.thought {
			t.Errorf("case %d: reasoning %q, want %q", i, got, c.thought)
		}
		if got := strings.Join(r.texts, ""); got != c.answer {
			t.Errorf("case %d: content %q, want %q", i, got, c.answer)
		}
		if len(r.calls) != c.calls {
			t.Errorf("case %d: %d calls, want %d", i, len(r.calls), c.calls)
		}
	}
}
