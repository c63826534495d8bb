"""Images to data: paper 000 §6.2's bag of visual terms, a folder of tagged images to a data set."""
