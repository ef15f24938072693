//go:build !race

package otelmcp

const raceBuild = false
