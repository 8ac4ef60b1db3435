"""The caches baked into the image and copied into the run-time folders before vLLM starts: the compile-cache layer
(compile_layer, made by `bake-cache` on a GPU host) and vLLM's model-info entries (model_info, made at image build)."""
