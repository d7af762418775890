//go:build unix && !linux && !darwin

package main

func platformOps() map[string]op {
	return map[string]op{
		"kill": {2, kill},
		"uid":  {0, uid},
	}
}
