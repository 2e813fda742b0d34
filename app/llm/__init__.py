"""Model providers and the middleware around them (cache, retries, limits, cost)."""
