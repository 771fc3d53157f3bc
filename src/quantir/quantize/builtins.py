"""LiteRT's operator codes (``enum BuiltinOperator : int32`` of the TFLite schema).

The quantizer names each integer op by the LiteRT builtin it becomes, so this vocabulary sits
below the spec table, the per-op declarations and both TFLite directions (the flatbuffer
schema in ``backends.tflite.schema`` re-exports it). The values are the schema's; only the
operators quantir reads, writes or names are listed.
"""
from __future__ import annotations

from enum import IntEnum


class BuiltinOperator(IntEnum):
    ADD = 0
    AVERAGE_POOL_2D = 1
    CONCATENATION = 2
    CONV_2D = 3
    DEPTHWISE_CONV_2D = 4
    DEPTH_TO_SPACE = 5
    DEQUANTIZE = 6
    EMBEDDING_LOOKUP = 7
    FLOOR = 8
    FULLY_CONNECTED = 9
    L2_NORMALIZATION = 11
    L2_POOL_2D = 12
    LOGISTIC = 14
    MAX_POOL_2D = 17
    MUL = 18
    RELU = 19
    RELU_N1_TO_1 = 20
    RELU6 = 21
    RESHAPE = 22
    RESIZE_BILINEAR = 23
    SOFTMAX = 25
    SPACE_TO_DEPTH = 26
    TANH = 28
    CUSTOM = 32
    PAD = 34
    GATHER = 36
    BATCH_TO_SPACE_ND = 37
    SPACE_TO_BATCH_ND = 38
    TRANSPOSE = 39
    MEAN = 40
    SUB = 41
    DIV = 42
    SQUEEZE = 43
    UNIDIRECTIONAL_SEQUENCE_LSTM = 44
    STRIDED_SLICE = 45
    EXP = 47
    SPLIT = 49
    LOG_SOFTMAX = 50
    CAST = 53
    PRELU = 54
    MAXIMUM = 55
    ARG_MAX = 56
    MINIMUM = 57
    LESS = 58
    NEG = 59
    PADV2 = 60
    GREATER = 61
    GREATER_EQUAL = 62
    LESS_EQUAL = 63
    SELECT = 64
    SLICE = 65
    TRANSPOSE_CONV = 67
    TILE = 69
    EXPAND_DIMS = 70
    EQUAL = 71
    NOT_EQUAL = 72
    LOG = 73
    SUM = 74
    SQRT = 75
    RSQRT = 76
    SHAPE = 77
    POW = 78
    ARG_MIN = 79
    REDUCE_MAX = 82
    PACK = 83
    REDUCE_MIN = 89
    SQUARE = 92
    RANGE = 96
    RESIZE_NEAREST_NEIGHBOR = 97
    LEAKY_RELU = 98
    SQUARED_DIFFERENCE = 99
    MIRROR_PAD = 100
    ABS = 101
    SPLIT_V = 102
    REVERSE_V2 = 105
    QUANTIZE = 114
    HARD_SWISH = 117
    SELECT_V2 = 123
    BATCH_MATMUL = 126
    PLACEHOLDER_FOR_GREATER_OP_CODES = 127
    BROADCAST_TO = 130
    GELU = 150
    RELU_0_TO_1 = 152
