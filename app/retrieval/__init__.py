"""Knowledge-base loading, deterministic chunking, ACL filtering and lexical retrieval."""
