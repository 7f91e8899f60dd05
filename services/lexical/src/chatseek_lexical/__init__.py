"""chatseek lexical service: stemmed BM25 and the strict Lucene message search."""
