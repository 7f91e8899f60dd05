"""chatseek embed service: embeddings and reranking (sentence-transformers, TEI, fake)."""
