"""Encrypted workloads built on hemx.ckks: CNN inference (``hemx.apps.cnn``) and logistic regression
(``hemx.apps.logreg``). Both run on scikit-learn's bundled datasets; nothing is downloaded."""
