package engine

import "unsafe"

// lookupDropMin is the token-embedding size from which lookups' pages are
// dropped after every chunk: smaller tables are cheap to keep.
const lookupDropMin = 32 << 20

// dropLookupPages releases the resident pages of the token-embedding table
// when it is used only for lookups (the output head is another tensor or a
// packed copy). Each lookup reads one row, but the kernel maps the 64 KiB
// around every faulting page (fault-around; MADV_RANDOM does not stop it),
// so a 512-token prompt on a 128K-token vocabulary left ~35 MiB of table
// resident that no one reads again. Dropping the mapping's pages keeps
// them in the page cache; the next lookup maps its page again.
//
// Gemma 4's per-layer token embeddings (per_layer_token_embd, several
// times the size of the embeddings in its small models) are only looked
// up, one row per token, and are dropped the same way.
func (m *Model) dropLookupPages() {
	if m.pleEmbd != nil && len(m.pleEmbd.Data) >= lookupDropMin {
		dropResidency(m.pleEmbd.Data, 0, len(m.pleEmbd.Data), m.logf)
	}
	e := m.embd.Data
	if len(e) < lookupDropMin {
		return
	}
	if m.output.Packed == nil && len(m.output.Data) > 0 && unsafe.SliceData(m.output.Data) == unsafe.SliceData(e) {
		return // the tied head reads the whole table every token
	}
	dropResidency(e, 0, len(e), m.logf)
}
