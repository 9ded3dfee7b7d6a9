module switchyard/peers/go

go 1.19

require golang.org/x/crypto v0.23.0
