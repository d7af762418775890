//go:build unix && !linux && !darwin

package main

func platformOps() map[string]op {
	m := map[string]op{
		"kill": {2, kill},
		"uid":  {0, uid},
	}
	for name, o := range unixOps() {
		m[name] = o
	}
	return m
}
