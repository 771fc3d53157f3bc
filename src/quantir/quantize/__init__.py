"""The quantization domain: observers, calibration methods, patterns, calibration, lowering."""
