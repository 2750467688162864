package version

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The constants equal include/moonlm.h's, so a release bumps both.
func TestMatchesHeader(t *testing.T) {
	h, err := os.ReadFile(filepath.Join("..", "..", "include", "moonlm.h"))
	require.NoError(t, err)
	ver := regexp.MustCompile(`#define MOONLM_VERSION_STRING "([^"]+)"`).FindSubmatch(h)
	abi := regexp.MustCompile(`#define MOONLM_ABI_VERSION (\d+)`).FindSubmatch(h)
	require.NotNil(t, ver, "MOONLM_VERSION_STRING not found in moonlm.h")
	require.NotNil(t, abi, "MOONLM_ABI_VERSION not found in moonlm.h")
	assert.Equal(t, string(ver[1]), Library)
	assert.Equal(t, string(abi[1]), strconv.Itoa(ABI))
}
