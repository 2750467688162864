package arch

import "testing"

// TestClosestNamesOnlySupportedFamilies: every entry of the resemblance
// table is an unsupported name pointing at a registered family, so the
// table cannot drift from the registry.
func TestClosestNamesOnlySupportedFamilies(t *testing.T) {
	for name, fam := range resembles {
		if _, ok := Lookup(name); ok {
			t.Errorf("%s is supported; it does not belong in the resemblance table", name)
		}
		if _, ok := Lookup(fam); !ok {
			t.Errorf("%s resembles %s, which is not a registered family", name, fam)
		}
	}
}

func TestClosest(t *testing.T) {
	for name, want := range map[string]string{
		"internlm2": "llama", "minicpm": "granite", "gemma3n": "gemma3",
		"mamba": "", "": "", "t5": "", "modern-bert": "bert",
	} {
		if got := Closest(name); got != want {
			t.Errorf("Closest(%q) = %q, want %q", name, got, want)
		}
	}
	for _, name := range Names() {
		if got := Closest(name); got != name {
			t.Errorf("Closest(%q) = %q for a supported family", name, got)
		}
	}
}
