package engine

import "github.com/moonlm/moonlm/engine/arch"

// Qwen3-Next's DeltaNet projections hold their outputs grouped by key
// head (arch.Ungroup): with r = VHeads/KHeads value heads per key head,
// ssm_in gives for key head g its query and key (State values each), then
// the values and the output gates of its value heads g*r .. g*r+r-1; ssm_ba
// gives for key head g the write strengths of those r value heads, then
// their decay inputs. DeltaNet reads all queries, then all keys, then all
// values (MX), the gates apart (Z), and the write strengths and decay
// inputs apart (BT, AL), value heads in the same order.

// ungroup reorders token t's row of in (arch.MXZ or arch.BA) into the
// buffers DeltaNet reads.
func (s *Session) ungroup(pl *plan, in arch.Buf, t int) {
	sp := &s.c.SSM
	if in == arch.MXZ {
		ungroupQKVZ(s.row(pl, in, t), s.row(pl, arch.MX, t), s.row(pl, arch.Z, t), sp.KHeads, sp.VHeads/sp.KHeads, sp.State)
		return
	}
	ungroupBA(s.row(pl, in, t), s.row(pl, arch.BT, t), s.row(pl, arch.AL, t), sp.KHeads, sp.VHeads/sp.KHeads)
}

// ungroupQKVZ splits src, per key head g of kh a query and a key of n
// values then r values and r gates of n, into mx (queries, keys, values)
// and z.
func ungroupQKVZ(src, mx, z []float32, kh, r, n int) {
	group := (2 + 2*r) * n
	vals := r * n
	for g := range kh {
		in := src[g*group : (g+1)*group]
		copy(mx[g*n:(g+1)*n], in[:n])
		copy(mx[(kh+g)*n:(kh+g+1)*n], in[n:2*n])
		copy(mx[2*kh*n+g*vals:2*kh*n+(g+1)*vals], in[2*n:2*n+vals])
		copy(z[g*vals:(g+1)*vals], in[2*n+vals:])
	}
}

// ungroupBA splits src, per key head g of kh r write strengths then r
// decay inputs, into beta and alpha.
func ungroupBA(src, beta, alpha []float32, kh, r int) {
	for g := range kh {
		copy(beta[g*r:(g+1)*r], src[2*g*r:2*g*r+r])
		copy(alpha[g*r:(g+1)*r], src[2*g*r+r:2*(g+1)*r])
	}
}
