package main

import "github.com/moonlm/moonlm/engine"

func (e engineModel) EmbedSize(pooling int) (int, error) {
	return e.m.EmbedSize(engine.Pooling(pooling))
}

func (e engineModel) EmbedTokenize(text string) ([]int32, error) {
	return e.m.Tokenize(text, true, false)
}

func (e engineModel) EmbedTokens(seqs [][]int32, pooling int, normalize bool) ([][]float32, error) {
	return e.m.EmbedTokens(seqs, engine.EmbedParams{Pooling: engine.Pooling(pooling), Normalize: normalize})
}

func (e engineModel) RerankTokens(query, doc string) ([]int32, error) {
	return e.m.RerankTokens(query, doc)
}
