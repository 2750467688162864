package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveProc is a `moonlm serve` child process.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr chan string // the rest of stderr once the process ends
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// startServe builds the CLI and runs `moonlm serve` on a free loopback
// port; it returns once /health says ready.
func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "moonlm")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run(), "go build")
	cmd := exec.Command(bin, append([]string{"serve", "--port", "0", "--packed-cache", "off"}, args...)...)
	errR, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &serveProc{cmd: cmd, stderr: make(chan string, 1)}
	br := bufio.NewReader(errR)
	var head strings.Builder
	for p.url == "" {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		require.NoError(t, err, "stderr so far: %s", head.String())
		if m := listening.FindStringSubmatch(line); m != nil {
			p.url = m[1]
			assert.Contains(t, line, "loopback only")
		}
	}
	go func() {
		rest, _ := io.ReadAll(br)
		p.stderr <- head.String() + string(rest)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
			require.Equal(t, 503, resp.StatusCode, "health while loading")
		}
		require.True(t, time.Now().Before(deadline), "the server was not ready in 30 s")
		time.Sleep(20 * time.Millisecond)
	}
}

// noEOGBias bans the model's end-of-generation tokens so that a generation
// runs to max_tokens.
func noEOGBias(t *testing.T, path string) string {
	m, err := engine.Open(path, engine.ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	var parts []string
	for id := range m.Info().VocabSize {
		if m.IsEOG(int32(id)) {
			parts = append(parts, fmt.Sprintf("%q:-100", strconv.Itoa(id)))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// SIGTERM drains: the stream in flight runs to its end, new connections
// are refused, and the process exits 0.
func TestServeSIGTERMDrains(t *testing.T) {
	model := shareddata.Model(t, "SmolLM2-135M-Instruct.Q4_1.gguf")
	p := startServe(t, "-m", model, "--parallel", "2", "--ctx", "512")
	const n = 48
	body := fmt.Sprintf(`{"prompt":"Once upon a time","max_tokens":%d,"temperature":0,"stream":true,"stream_options":{"include_usage":true},"logit_bias":%s}`, n, noEOGBias(t, model))
	resp, err := http.Post(p.url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	require.True(t, sc.Scan(), "first chunk")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))

	// The listener closes at once; the stream goes on to its end.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := http.Get(p.url + "/health")
		if err != nil {
			break
		}
		r.Body.Close()
		require.True(t, time.Now().Before(deadline), "still accepting connections after SIGTERM")
		time.Sleep(10 * time.Millisecond)
	}
	var finish string
	var completion int
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c), data)
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			completion = c.Usage.CompletionTokens
		}
	}
	assert.True(t, done, "the drained stream ends with [DONE]")
	assert.Equal(t, "length", finish)
	assert.Equal(t, n, completion)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		assert.NoError(t, err, "exit status")
	case <-ctx.Done():
		t.Fatal("the server did not exit after draining")
	}
	stderr := <-p.stderr
	assert.Contains(t, stderr, "draining")
	assert.Contains(t, stderr, "moonlm serve: stopped")
}

// Past --shutdown-timeout the requests in flight are stopped and the
// process still exits 0.
func TestServeShutdownTimeout(t *testing.T) {
	model := shareddata.Model(t, "SmolLM2-135M-Instruct.Q4_1.gguf")
	p := startServe(t, "-m", model, "--ctx", "4096", "--shutdown-timeout", "300ms")
	body := `{"prompt":"Once upon a time","max_tokens":4000,"temperature":0,"stream":true,"logit_bias":` + noEOGBias(t, model) + `}`
	resp, err := http.Post(p.url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	_, err = br.ReadString('\n')
	require.NoError(t, err)
	t0 := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	io.Copy(io.Discard, br)
	require.NoError(t, p.cmd.Wait())
	assert.Less(t, time.Since(t0), 15*time.Second)
	assert.Contains(t, <-p.stderr, "after the shutdown timeout")
}

func TestServeOptionErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"serve"}, "no model"},
		{[]string{"serve", "-m", "x.gguf", "--parallel", "0"}, "--parallel 0"},
		{[]string{"serve", "-m", "x.gguf", "--port", "70000"}, "--port 70000"},
		{[]string{"serve", "-m", "x.gguf", "--chat-template", "no-such-format-or-file"}, "not a built-in format"},
		{[]string{"serve", "-m", "x.gguf", "--api-key", "a", "--api-key-file", "b"}, "give one"},
	} {
		_, stderr, st := runCLI(t, "", c.args...)
		assert.Equal(t, 1, st, "%v", c.args)
		assert.Contains(t, stderr, c.msg, "%v", c.args)
	}
	// A template file is parsed before anything else happens.
	bad := filepath.Join(t.TempDir(), "bad.jinja")
	require.NoError(t, os.WriteFile(bad, []byte("{% if %}"), 0o644))
	_, stderr, st := runCLI(t, "", "serve", "-m", "x.gguf", "--port", "0", "--chat-template", bad)
	assert.Equal(t, 1, st)
	assert.Contains(t, stderr, "chat template")
	assert.NotContains(t, stderr, "listening")
}
