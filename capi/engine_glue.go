package main

import "errors"

// Placeholder until package engine lands: every engine-backed call reports
// MOONLM_UNSUPPORTED. Replaced by the real adapter.

var errNoEngine = errors.New("the engine is not built into this library yet")

func init() {
	errorClasses = append(errorClasses, errorClass{errNoEngine, stUnsupported})
}

func openModel(path string, p modelParams) (backendModel, error) {
	return nil, errNoEngine
}

func newSampler(p samplerParams) (backendSampler, error) {
	return nil, errNoEngine
}
