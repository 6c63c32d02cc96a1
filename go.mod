module github.com/runstream/runstream

go 1.26
