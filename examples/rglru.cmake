# RG-LRU examples (included by examples/CMakeLists.txt).
hawk_add_example(rglru_forward)
hawk_add_example(rglru_decode)
hawk_add_example(custom_tile_config)

# The backward: a training step (forward with checkpoints, loss, backward, SGD).
hawk_add_example(rglru_training_step)
