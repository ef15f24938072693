//go:build race

package otelmcp

const raceBuild = true
