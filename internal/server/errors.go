package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error in OpenAI's shape: the HTTP status it is sent with
// and the body {"error":{"message","type","param","code"}}. Clients (the
// openai packages) raise a typed exception from the status and read the
// message from the body.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// RetryAfter, if > 0, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Message }

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// invalid is a 400 about a request's field param (may be "").
func invalid(param, code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...),
		Type: "invalid_request_error", Param: strp(param), Code: strp(code)}
}

// unsupported is the 400 for a request field this build does not
// implement: refused, never silently ignored.
func unsupported(param string) *apiError {
	return invalid(param, "unsupported_parameter", "%s is not supported by this server build", param)
}

func serverError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Message: fmt.Sprintf(format, args...), Type: "server_error", Code: strp(code)}
}

// writeError sends e as an OpenAI error response.
func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	b, _ := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e})
	w.Write(append(b, '\n'))
}
