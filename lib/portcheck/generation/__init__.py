"""Generation compared: decode (one side's cached decoding step by step, each step's model call kept to be made
again), generate (compare_generate: the two sides fed the same tokens, each step's logits and cache held to the
measured rule, the first parting step's call compared module by module; check_cache), own (each side against
itself: cached decoding against recomputing the prefix with no cache), verdict (GenerateReport, OwnReport), feeding (each library's own way of feeding its model a step: its input preparation, an encoder-decoder's encoder run once), steps (each step judged, torch's against Paddle's, and the arguments the two sides pass differently), caches (each layer's cached keys and values read from any form and judged, left-padded positions left out), origin (positions numbered from another origin, said, not judged a bug), command
(`python -m portcheck generate`: two checkpoint folders of any family, each model the class its config names, decoding step by step).

May import portcheck.core, portcheck.mapping, portcheck.forward and portcheck.checkpoints (command builds the
models from their folders); torch and Paddle only inside the functions handed their models."""
