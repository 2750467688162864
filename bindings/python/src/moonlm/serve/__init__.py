"""Serving moonlm models: `moonlm.serve.ray` runs `moonlm serve` replicas
on Ray Serve (it needs `ray[serve]`, which the package does not install)."""
