"""Calibration and evaluation: labelled questions, thresholds, cross-validation, intervals."""
