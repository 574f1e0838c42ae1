# Gate-residual example: forward and backward through the default dispatch, checked against the float64
# reference.
hawk_add_example(gate_residual)
