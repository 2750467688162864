//go:build unix && !linux

package packcache

const mapPopulate = 0
