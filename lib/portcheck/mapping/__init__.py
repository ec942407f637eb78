"""Which torch module and weight is which Paddle one: names (a name map's forms), pairing (the two runs' module
calls aligned), fused (fused layers and their packed parts), recipes (known fused layouts), trace (one side's
run recorded, and which framework a model is), convert (weights converted to Paddle's layout), weights (strict
loading).

May import portcheck.core; torch and Paddle only inside the functions handed their models."""
