"""Checkpoint folders compared block by block: what `python -m portcheck layers` reads. checkpoint (a folder judged
before anything is built from it: its shards' headers, its config's sizes, the memory), stream (a transformers Llama
and its paddlenlp port compared block by block from their folders, never both whole models in memory), split_folders
(`layers --tp`: paddlenlp's own split of a folder as each rank's weights, judged by parallel's compare_split),
formers_folders (`layers` on PaddleFormers folders, each side loaded by its own library, judged as loaded),
formers_split (`layers --tp` on PaddleFormers folders: the Paddle folder loaded by paddleformers in each
tensor-parallel rank), family_folders (a model of any family whole from its folder, the class its config names, each
tensor matched by name and shape: `python -m portcheck generate`), fleet (stand-ins for paddlefleet, not on PyPI, so
that paddleformers' base models import; tests/formers and tools/zoo/formers.py install them too).

May import portcheck.core, portcheck.mapping, portcheck.forward and portcheck.parallel; torch, Paddle and their model
libraries only inside the functions that load a folder."""
